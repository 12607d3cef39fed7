"""The server's routes, one handler per endpoint, over the
:class:`~transformer.serving.state.ServerState` of their app.

Handlers are plain functions that find their models, metrics and batchers on
``request.app.state.server`` (set by :func:`transformer.serving.app.create_app`), so several apps
in one process (tests) each answer from their own. A refused request raises
:class:`~transformer.serving.errors.ApiError`: 422 past a limit, 503 with ``Retry-After`` when its
model's queue is full, 504 when it waited out its deadline in the queue.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse

from transformer.errors import InputError
from transformer.serving.batcher import Batcher, DeadlineExpired, Overloaded
from transformer.serving.errors import ApiError
from transformer.serving.guard import ARRIVED, overloaded_line
from transformer.serving.models import ServedModel
from transformer.serving.reload import reload_changed
from transformer.serving.schemas import (
    REQUEST_FIELDS,
    AttentionRequest,
    ClassifyRequest,
    TranslateRequest,
)
from transformer.serving.score import score
from transformer.serving.state import checked, pick, server_state

STATIC = files("transformer.serving") / "static"


async def submit_unless_gone(request: Any, batcher: Batcher, payload: Any, *, tokens: int,
                             gone: asyncio.Future | None = None, **submit: Any) -> Any:
    """``batcher.submit(payload, **submit)``, given up as soon as the client disconnects: its
    request then leaves the queue and costs the others nothing. The disconnect is awaited (the
    next ASGI message after the body), never polled, so a full queue costs the event loop
    nothing while it waits. ``gone``: a watch on the disconnect (:func:`watch_disconnect`) that
    outlives this call (a stream's several submits), else one of its own."""
    own = gone is None
    gone = watch_disconnect(request) if gone is None else gone
    if gone.done():
        raise ApiError(499, "client disconnected")
    task = asyncio.ensure_future(batcher.submit(payload, tokens=tokens, **submit))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        raise ApiError(499, "client disconnected")
    finally:
        task.cancel()  # a no-op once it is done; else the request leaves the queue
        if own:
            gone.cancel()


def watch_disconnect(request: Any) -> asyncio.Future:
    """A task done when the client of ``request`` (whose body has been read) disconnects."""
    return asyncio.ensure_future(_disconnect(request))


async def _disconnect(request: Any) -> None:
    """Return when the client of ``request`` (whose body has been read) disconnects."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def queued(request: Request, model: ServedModel, payload: Any, *, tokens: int,
                 timeout_ms: int | None, **submit: Any) -> Any:
    """``payload`` through ``model``'s batcher (queued, batched, answered), waiting at most the
    server's ``--timeout-s`` or the request's shorter ``timeout_ms`` since it came: ApiError 503
    (with ``Retry-After``) when the queue is full, 504 when the wait runs out; both counted
    (``submit``: :func:`submit_unless_gone`'s ``gone``, the batcher's ``call`` and ``texts``)."""
    state = server_state(request)
    timeout_s = state.settings.timeout_s
    if timeout_ms is not None:
        timeout_s = min(timeout_s, timeout_ms / 1000)
    # the time the request spent in the server before its first trip through a queue counts
    # (a stream's later parts come later by its own doing)
    arrived = request.scope.pop(ARRIVED, None)
    waited_s = time.perf_counter() - arrived if arrived is not None else 0.0
    try:
        return await submit_unless_gone(request, state.batchers[model.name], payload, tokens=tokens,
                                        timeout_s=timeout_s, waited_s=waited_s, **submit)
    except Overloaded as err:
        state.metrics.shed[(model.name, "queue_full")] += 1
        line, retry = overloaded_line(model.name, state.settings.max_queue_wait_s, err.retry_after_s)
        raise ApiError(503, line, headers={"Retry-After": retry}) from None
    except DeadlineExpired:
        state.metrics.shed[(model.name, "deadline")] += 1
        raise ApiError(504, f"timeout: waited {timeout_s:g} s in the queue of {model.name!r} "
                       "without starting") from None


def _rounded(maps: list[Any]) -> list[Any]:
    """Per-layer (H, Lq, Lk) tensors -> nested lists with 4 decimals (keeps the JSON small)."""
    return [m.float().round(decimals=4).tolist() for m in maps]


def answer(body: dict[str, Any]) -> JSONResponse:
    """``body`` (plain JSON values: dicts, lists, str, int, float, bool, None) as the JSON answer
    FastAPI would render for it, without its encoder's walk through every value first (a fifth
    of a millisecond for eight translations, on the event loop every request waits on)."""
    return JSONResponse(body)


def _elapsed_ms(start: float) -> dict[str, float]:
    return {"total_ms": round((time.perf_counter() - start) * 1000, 3)}


async def health(request: Request) -> dict[str, Any]:
    return {"status": "ok", "models": sorted(server_state(request).served)}


async def prometheus(request: Request) -> PlainTextResponse:
    state = server_state(request)
    return PlainTextResponse(state.metrics.render(state.queues()), media_type="text/plain; version=0.0.4")


async def models(request: Request) -> dict[str, Any]:
    """Each model (with ``reload_error`` when its changed directory failed to load) and the
    server's limits."""
    state = server_state(request)
    described = []
    for name, model in state.served.items():
        info = model.describe()
        if name in state.reload_errors:
            info["reload_error"] = state.reload_errors[name]
        described.append(info)
    return {"models": described, "limits": state.settings.describe()}


async def reload(request: Request) -> dict[str, Any]:
    """``POST /v1/admin/reload``: what SIGHUP does, answered when done."""
    return await reload_changed(server_state(request))


def _decoding_of(req: TranslateRequest, model: ServedModel) -> tuple[Any, list[str], list[list[str]] | None]:
    """A translate request's decoding options (the run's limits, then the request's), its
    per-text target prefixes and target phrases (None: none asked); ApiError 422 naming the
    request's field for a bad combination."""
    from transformer.config.decoding import OptionError
    from transformer.decoding.plan import check_for_model
    from transformer.inference.glossary import check_phrases

    try:
        options, prefixes, phrases = model.default_options(**req.decode_changes()), req.prefixes(), req.phrases()
        check_for_model(options, model_max_len=model.translator.config.max_len)  # type: ignore[union-attr]
    except OptionError as err:
        raise ApiError(422, err.named(REQUEST_FIELDS)) from None
    except ValueError as err:
        raise ApiError(422, str(err)) from None
    where = "constraints" if req.constraints is not None else "glossary"
    if phrases is not None and options.sampling:
        raise ApiError(422, f"{where}: need beam search (or greedy decoding), not sampling")
    try:  # each distinct phrase once: one the target vocabulary cannot spell fails its request
        check_phrases(phrases or [], model.translator.phrase_ids, lambda _: where)  # type: ignore[union-attr]
    except InputError as err:
        raise ApiError(422, str(err)) from None
    field = "target_prefix" if req.target_prefixes is None else "target_prefixes"
    try:  # here, not in the batch: a bad prefix must fail its own request only
        for prefix in set(prefixes):
            model.translator.prefix_ids(prefix)  # type: ignore[union-attr]
    except InputError as err:
        raise ApiError(422, f"{field}: {err}") from None
    return options, prefixes, phrases


def _tag_of(req: TranslateRequest, model: ServedModel) -> tuple[int, ...]:
    """The ids of the request's ``tag`` (none without one); ApiError 422 naming the field when the
    model's source vocabulary lacks it."""
    if req.tag is None:
        return ()
    from transformer.inference.tags import tag_ids

    try:
        return tuple(tag_ids(model.translator.src_tokenizer, req.tag, flag="tag"))  # type: ignore[union-attr]
    except InputError as err:
        raise ApiError(422, str(err)) from None


@dataclass(frozen=True)
class TranslateJob:
    """A checked ``/v1/translate`` request, as its route and the stream's decode it: the model,
    the options, each text's target prefix and phrases, and the source tag's ids."""

    state: Any
    model: ServedModel
    options: Any
    prefixes: list[str]
    phrases: list[list[str]] | None
    tag: tuple[int, ...]


def translate_job(req: TranslateRequest, request: Request) -> TranslateJob:
    """The model and decoding of a translate request (keys and limits checked); ApiError 404 or
    422 naming the field at fault."""
    state = server_state(request)
    model = pick(state.served, req.model, "translation")
    checked(req, request)
    options, prefixes, phrases = _decoding_of(req, model)
    return TranslateJob(state, model, options, prefixes, phrases, _tag_of(req, model))


async def translate(req: TranslateRequest, request: Request) -> JSONResponse:
    start = time.perf_counter()
    job = translate_job(req, request)
    state, model, options, prefixes, phrases, tag = (job.state, job.model, job.options, job.prefixes,
                                                     job.phrases, job.tag)
    tokens = model.count_tokens(req.texts)
    if req.format == "html":  # markup kept: transformer.serving.html_route
        from transformer.serving.html_route import html_rows, html_work

        work = html_work(req, model, options=options, tag=tag)
        found = await queued(request, model, None, tokens=tokens, timeout_ms=req.timeout_ms, call=work,
                             texts=len(req.texts))
        state.metrics.sentences[model.name] += len(req.texts)
        return answer({"model": model.name, "translations": html_rows(found), "timing": _elapsed_ms(start)})
    found = await queued(request, model, (list(req.texts), options, req.split, prefixes, tag, phrases),
                         tokens=tokens, timeout_ms=req.timeout_ms, texts=len(req.texts))
    state.metrics.sentences[model.name] += len(req.texts)
    out = [t.to_dict(nbest=req.nbest is not None, alignments=bool(req.alignments))
           for t in found]
    return answer({"model": model.name, "translations": out, "timing": _elapsed_ms(start)})


async def classify(req: ClassifyRequest, request: Request) -> JSONResponse:
    start = time.perf_counter()
    state = server_state(request)
    model = pick(state.served, req.model, "classification")
    checked(req, request)
    rows = await queued(request, model, list(req.texts), tokens=model.count_tokens(req.texts),
                        timeout_ms=req.timeout_ms, texts=len(req.texts))
    state.metrics.sentences[model.name] += len(req.texts)
    return answer({"model": model.name,
                   "results": [{"text": t, **r} for t, r in zip(req.texts, rows, strict=True)],
                   "multi_label": bool(model.classifier.multi_label), "thresholds": model.thresholds(),
                   "timing": _elapsed_ms(start)})


def _attention_text(req: AttentionRequest, model: ServedModel) -> tuple[str, list[str]]:
    """(the text to look inside, the sentences it was cut from): a translation model's text
    without a target is split into sentences and ``req.sentence`` (1-based) is taken."""
    if model.task == "translation" and req.target is None:  # one sentence at a time
        from transformer.inference.lines import nth_sentence

        try:
            return nth_sentence(req.text, req.sentence, lang=model.loaded.record.languages[0])
        except ValueError as err:
            raise ApiError(422, f"sentence: {err}") from None
    if req.sentence != 1:
        raise ApiError(422, "sentence: only a translation model's text without a target is "
                       "split into sentences")
    return req.text, [req.text]


async def attention(req: AttentionRequest, request: Request) -> dict[str, Any]:
    from transformer.visualization.sentence import sentence_attention

    served = server_state(request).served
    model = served.get(req.model)
    if model is None:
        pick(served, req.model, "translation")  # raises the 404
    checked(req, request)
    if req.target is not None and model.task != "translation":
        raise ApiError(422, "target: only a translation model has a target")
    text, sentences = _attention_text(req, model)

    def work() -> Any:
        return sentence_attention(model.loaded, text, target=req.target)

    try:  # in the model's queue and its own thread: never two calls on one model at once
        att = await queued(request, model, None, tokens=model.count_tokens([text]),
                           timeout_ms=req.timeout_ms, call=work)
    except InputError as err:
        raise ApiError(422, f"text: {err}") from None
    return {"model": model.name, "task": att.task, "output": att.output,
            "sentence": req.sentence, "sentences": sentences,
            "source_tokens": att.src_tokens, "target_tokens": att.tgt_out_tokens,
            "decoder_input_tokens": att.tgt_in_tokens,
            "attention": {"encoder": _rounded(att.encoder), "decoder": _rounded(att.decoder),
                          "cross": _rounded(att.cross)}}


async def page() -> FileResponse:
    return FileResponse(str(STATIC / "index.html"))


def add_routes(app: FastAPI) -> None:
    """Every endpoint of the API and the web page at ``/``, in the order the schema lists them."""
    app.add_api_route("/health", health, methods=["GET"])
    app.add_api_route("/metrics", prometheus, methods=["GET"], response_class=PlainTextResponse)
    app.add_api_route("/v1/models", models, methods=["GET"])
    app.add_api_route("/v1/translate", translate, methods=["POST"])
    app.add_api_route("/v1/classify", classify, methods=["POST"])
    app.add_api_route("/v1/attention", attention, methods=["POST"])
    app.add_api_route("/v1/score", score, methods=["POST"])
    app.add_api_route("/v1/admin/reload", reload, methods=["POST"])
    app.add_api_route("/", page, methods=["GET"], include_in_schema=False)
