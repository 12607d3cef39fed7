"""``transformer serve``: translation and classification models over HTTP, with the web page."""

from __future__ import annotations

import argparse
import os

from transformer.cli.common import add_device_threads, inference_device, set_threads
from transformer.cli.decoding import add_engine
from transformer.config.choices import INFERENCE_PRECISIONS
from transformer.errors import InputError

API_KEY_ENV = "TRANSFORMER_API_KEY"


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve models over HTTP (JSON API and the web page at /)",
        description="Load every --model once and serve them: POST /v1/translate, /v1/attention, "
        "/v1/classify; GET /v1/models, /health, /metrics (Prometheus), /openapi.json, and the web "
        "page at /. Concurrent requests for one model are decoded together (dynamic batching).",
    )
    p.add_argument("--model", action="append", required=True, metavar="[NAME=]RUN_DIR",
                   help="a model directory, named NAME in requests (default: the directory's name); "
                   "repeat for more models")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--batch-wait-ms", type=float, default=50.0,
                   help="longest wait of a batch for more requests after its first (default 50; a "
                   "batch as big as the previous one with nothing more queued starts at once)")
    p.add_argument("--batch-tokens", type=int, default=4096,
                   help="source tokens in one batch at most (default 4096)")
    p.add_argument("--no-batching", action="store_true", help="run every request alone")
    p.add_argument("--max-body-bytes", type=int, default=1 << 20,
                   help="largest request body (default 1 MiB)")
    p.add_argument("--api-key", help=f"require this key on /v1/ (default: ${API_KEY_ENV} if set)")
    p.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                   help="allow browser calls from ORIGIN (repeatable; default: CORS off)")
    p.add_argument("--precision", choices=INFERENCE_PRECISIONS, default="auto",
                   help="inference precision: auto (default; bf16 where this machine runs it "
                   "natively and a probe of each model finds it faster, else fp32), fp32, bf16, "
                   "or int8 (translators' decoders with int8 weights, made once at start, on "
                   "the CPU; classifiers stay fp32)")
    add_engine(p)
    add_device_threads(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port must be between 0 and 65535, got {args.port}")
    if args.batch_wait_ms < 0:
        raise InputError(f"--batch-wait-ms must be non-negative, got {args.batch_wait_ms}")
    if args.batch_tokens < 1:
        raise InputError(f"--batch-tokens must be positive, got {args.batch_tokens}")
    if args.max_body_bytes < 1:
        raise InputError(f"--max-body-bytes must be positive, got {args.max_body_bytes}")
    try:
        import uvicorn

        from transformer.serving.app import ServeSettings, create_app
        from transformer.serving.models import load_served, parse_model_specs
    except ImportError as err:
        raise InputError(f"serve needs the 'serve' extra (pip install 'transformer[serve]'): {err}") from None

    set_threads(args.threads)
    served = load_served(parse_model_specs(args.model), precision=args.precision,
                         engine=args.engine, device=inference_device(args.device, args.precision))
    settings = ServeSettings(max_wait_ms=args.batch_wait_ms, max_batch_tokens=args.batch_tokens,
                             batching=not args.no_batching, max_body_bytes=args.max_body_bytes,
                             api_key=args.api_key or os.environ.get(API_KEY_ENV) or None,
                             cors_origins=tuple(args.cors_origin))
    app = create_app(served, settings=settings)
    print(f"serving {', '.join(served)} on http://{args.host}:{args.port}/ (API: /docs)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0
