"""``transformer serve``: translation and classification models over HTTP, with the web page."""

from __future__ import annotations

import argparse
import os

from transformer.cli.common import (
    add_device_threads,
    add_inference_precision,
    inference_device,
    set_threads,
)
from transformer.cli.decoding import add_engine
from transformer.errors import InputError
from transformer.serving.settings import (
    TIMEOUT_PER_BOUND,
    Limits,
    ServeSettings,
    api_keys,
    parse_languages,
)

API_KEY_ENV = "TRANSFORMER_API_KEY"
DEFAULT = ServeSettings()


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve models over HTTP (JSON API and the web page at /)",
        description="Load every --model once and serve them: POST /v1/translate, /v1/attention, "
        "/v1/classify, /v1/admin/reload; GET /v1/models, /health, /metrics (Prometheus), "
        "LibreTranslate's POST /translate, /detect and GET /languages, "
        "/openapi.json, and the web page at /. Concurrent requests for one model are decoded "
        "together (dynamic batching) through a bounded queue. SIGHUP reloads the models whose "
        "directories changed; SIGTERM answers every request let in, then exits.",
    )
    p.add_argument("--model", action="append", required=True, metavar="[NAME=]RUN_DIR",
                   help="a model directory, named NAME in requests (default: the directory's name); "
                   "repeat for more models")
    p.add_argument("--languages", action="append", default=[], metavar="NAME=SOURCE:TARGET[,TARGET...]",
                   help="the languages of the model NAME, for LibreTranslate's routes (POST "
                   "/translate, /detect, GET /languages), when its run record lacks src_lang and "
                   "tgt_lang (or to choose a multi-target model's >>id<< targets); repeat per model")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--batch-wait-ms", type=float,
                   help=f"longest wait of a batch for more requests after its first (default "
                   f"{DEFAULT.max_wait_ms:g}; a batch as big as the previous one with nothing more "
                   "queued starts at once)")
    p.add_argument("--batch-tokens", type=int,
                   help=f"source tokens in one batch at most (default {DEFAULT.max_batch_tokens})")
    p.add_argument("--no-batching", action="store_true", help="run every request alone")
    add_inference_precision(p, what="inference precision", int8="translators' decoders with "
                            "int8 weights, made once at start, on the CPU (classifiers stay fp32); "
                            "the probe runs per model")
    add_engine(p)
    add_device_threads(p)
    _add_operation(p)
    p.set_defaults(handler=run)


def _add_operation(p: argparse.ArgumentParser) -> None:
    """The flags of a server in operation: access, limits, overload, drain."""
    g = p.add_argument_group("access and limits")
    g.add_argument("--api-key", action="append", metavar="KEY[:N]",
                   help=f"require this key on /v1/, at most N requests a minute with it when :N "
                   f"is given (repeatable; default: ${API_KEY_ENV} if set)")
    g.add_argument("--api-key-file", metavar="FILE",
                   help="keys from FILE, one a line: KEY or KEY REQUESTS_PER_MINUTE ('#' comments)")
    g.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                   help="allow browser calls from ORIGIN (repeatable; default: CORS off)")
    g.add_argument("--max-body-bytes", type=int,
                   help=f"largest request body (default {DEFAULT.max_body_bytes})")
    limits = Limits()
    for flag, what, value in (("--max-texts", "texts in one request", limits.max_texts),
                              ("--max-chars", "characters in one text", limits.max_chars),
                              ("--max-beam", "beam size and n-best list", limits.max_beam),
                              ("--max-output-tokens", "target tokens of a translated sentence, "
                               "also the length of one whose request names no max_len",
                               limits.max_output_tokens)):
        g.add_argument(flag, type=int, metavar="N", help=f"{what}, at most (default {value})")
    o = p.add_argument_group("overload and shutdown")
    o.add_argument("--max-queue-wait-s", type=float, metavar="S",
                   help=f"a request is let in only if its answer is due within S seconds (the "
                   f"work queued, at the measured seconds per request and per token of the "
                   f"model's recent batches); one past it gets 503 with Retry-After "
                   f"(default {DEFAULT.max_queue_wait_s:g})")
    o.add_argument("--timeout-s", type=float, metavar="S",
                   help=f"a request still queued after S seconds (or its own shorter timeout_ms) "
                   f"gets 504 (default {TIMEOUT_PER_BOUND:g} times --max-queue-wait-s)")
    o.add_argument("--drain-s", type=float, metavar="S",
                   help=f"on SIGTERM, stop accepting and answer the requests let in for at most S "
                   f"seconds, then exit (0: all answered; default {DEFAULT.drain_s:g})")


def settings_from(args: argparse.Namespace) -> ServeSettings:
    """The flags over the defaults of :class:`~transformer.serving.settings.ServeSettings`."""

    def given(**values: object) -> dict[str, object]:
        return {name: value for name, value in values.items() if value is not None}

    limits = Limits(**given(max_texts=args.max_texts, max_chars=args.max_chars,
                            max_beam=args.max_beam, max_output_tokens=args.max_output_tokens))
    keys = api_keys(api_key=args.api_key or os.environ.get(API_KEY_ENV) or None,
                    key_file=args.api_key_file)
    return ServeSettings(**given(max_wait_ms=args.batch_wait_ms, max_batch_tokens=args.batch_tokens,
                                 max_body_bytes=args.max_body_bytes,
                                 max_queue_wait_s=args.max_queue_wait_s, timeout_s=args.timeout_s,
                                 drain_s=args.drain_s),
                         batching=not args.no_batching, api_keys=keys, limits=limits,
                         cors_origins=tuple(args.cors_origin),
                         model_languages=tuple(parse_languages(spec) for spec in args.languages))


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port must be between 0 and 65535, got {args.port}")
    settings = settings_from(args)
    try:
        from transformer.serving.app import create_app
        from transformer.serving.models import load_served, parse_model_specs
        from transformer.serving.process import serve_until_stopped
    except ImportError as err:
        raise InputError(f"serve needs the 'serve' extra (pip install 'transformer[serve]'): {err}") from None

    set_threads(args.threads)
    specs = parse_model_specs(args.model)
    for stated in settings.model_languages:
        if stated.model not in specs:
            raise InputError(f"--languages {stated.model}=...: no --model is named {stated.model!r} "
                             f"(models: {', '.join(specs)})")
    served = load_served(specs, precision=args.precision,
                         engine=args.engine, device=inference_device(args.device, args.precision))
    app = create_app(served, settings=settings)
    print(f"serving {', '.join(served)} on http://{args.host}:{args.port}/ (API: /docs)", flush=True)
    return serve_until_stopped(app, host=args.host, port=args.port)
