"""The HTTP server: a FastAPI app over models already loaded (so tests run it in-process).

    served = load_served({"en-de": "runs/m30k"})
    app = create_app(served, settings=ServeSettings(max_wait_ms=5))
    uvicorn.run(app, host="127.0.0.1", port=8000)

Routes: ``POST /v1/translate``, ``POST /v1/attention``, ``POST /v1/classify``, ``GET /v1/models``,
``GET /health``, ``GET /metrics``, the web page at ``/`` (files of ``serving/static``) and the
OpenAPI schema at ``/openapi.json``. Every error is a 4xx (or a 500) with ``{"error": "one line"}``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from transformer.errors import InputError
from transformer.serving.batcher import Batcher
from transformer.serving.guard import Guard
from transformer.serving.metrics import Metrics
from transformer.serving.models import ServedModel
from transformer.serving.schemas import (
    REQUEST_FIELDS,
    AttentionRequest,
    ClassifyRequest,
    TranslateRequest,
    error_line,
)

log = logging.getLogger(__name__)
STATIC = files("transformer.serving") / "static"


@dataclass(frozen=True)
class ServeSettings:
    """How the server batches and what it lets in. ``batching=False`` runs every request alone."""

    max_wait_ms: float = 50.0  # longest wait for more requests after the first of a batch
    max_batch_tokens: int = 4096  # source tokens in one batch
    batching: bool = True
    max_body_bytes: int = 1 << 20
    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()


class ApiError(Exception):
    """A request the server refuses: HTTP ``status`` and one line naming the field."""

    def __init__(self, status: int, line: str) -> None:
        super().__init__(line)
        self.status = status
        self.line = line


async def submit_unless_gone(request: Any, batcher: Batcher, payload: Any, *, tokens: int,
                             poll_s: float = 0.1) -> Any:
    """``batcher.submit(payload)``, given up as soon as the client disconnects (checked every
    ``poll_s``): its request then leaves the queue and costs the others nothing."""
    task = asyncio.ensure_future(batcher.submit(payload, tokens=tokens))
    while True:
        done, _ = await asyncio.wait({task}, timeout=poll_s)
        if done:
            return task.result()
        if await request.is_disconnected():
            task.cancel()
            raise ApiError(499, "client disconnected")


def _rounded(maps: list[Any]) -> list[Any]:
    """Per-layer (H, Lq, Lk) tensors -> nested lists with 4 decimals (keeps the JSON small)."""
    return [m.float().round(decimals=4).tolist() for m in maps]


def _decoding_of(req: TranslateRequest, model: ServedModel) -> tuple[Any, list[str]]:
    """A translate request's decoding options (the run's limits, then the request's) and its
    per-text target prefixes; ApiError 422 naming the request's field for a bad combination."""
    from transformer.config.decoding import OptionError

    try:
        options, prefixes = model.default_options(**req.decode_changes()), req.prefixes()
    except OptionError as err:
        raise ApiError(422, err.named(REQUEST_FIELDS)) from None
    except ValueError as err:
        raise ApiError(422, str(err)) from None
    field = "target_prefix" if req.target_prefixes is None else "target_prefixes"
    try:  # here, not in the batch: a bad prefix must fail its own request only
        for prefix in set(prefixes):
            model.translator.prefix_ids(prefix)  # type: ignore[union-attr]
    except InputError as err:
        raise ApiError(422, f"{field}: {err}") from None
    return options, prefixes


def _translation_row(t: Any, *, nbest: bool) -> dict[str, Any]:
    """One translation of a ``/v1/translate`` answer: text, scores, sentences (and n-best)."""
    row: dict[str, Any] = {"text": t.text, "score": t.score, "log_prob": t.log_prob,
                           "log_prob_per_token": t.log_prob_per_token, "sentences": t.sentences,
                           "cut_sentences": t.cut}
    if nbest:
        row["nbest"] = [{"text": text, "score": score, "log_prob": lp,
                         "log_prob_per_token": lp / n if n else None}
                        for (text, score), (lp, n) in zip(t.nbest, t.nbest_log_probs, strict=True)]
    return row


def create_app(served: dict[str, ServedModel], *, settings: ServeSettings | None = None) -> Any:
    """The ASGI application over ``served`` (see :func:`transformer.serving.models.load_served`)."""
    settings = settings or ServeSettings()
    metrics = Metrics()
    batchers: dict[str, Batcher] = {}  # this app's own: several apps may serve one set of models

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        for model in served.values():
            run = model.translate_batch if model.task == "translation" else model.classify_batch
            name = model.name

            def on_batch(size: int, tokens: int, name: str = name) -> None:
                metrics.batch(name, size, tokens, 0)

            batchers[name] = Batcher(run, executor=model.executor,
                                    max_wait_s=settings.max_wait_ms / 1000 if settings.batching else 0.0,
                                    max_tokens=settings.max_batch_tokens,
                                    max_requests=256 if settings.batching else 1, on_batch=on_batch)
            batchers[name].start()
        yield
        for batcher in batchers.values():
            await batcher.stop()

    app = FastAPI(title="transformer", version="1", lifespan=lifespan,
                  description="Translate, classify and look inside Transformer models.")
    app.state.batchers = batchers  # by model name, once started (what a test or a probe inspects)

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, err: ApiError) -> JSONResponse:
        return JSONResponse({"error": err.line}, status_code=err.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        errors = list(err.errors())
        status = 400 if errors and errors[0].get("type") == "json_invalid" else 422
        return JSONResponse({"error": error_line(errors)}, status_code=status)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, err: StarletteHTTPException) -> JSONResponse:
        line = f"{request.url.path}: {err.detail}" if err.status_code in (404, 405) else str(err.detail)
        return JSONResponse({"error": line}, status_code=err.status_code)

    @app.exception_handler(Exception)
    async def _internal(_: Request, err: Exception) -> JSONResponse:
        log.exception("internal error")
        return JSONResponse({"error": f"internal error: {type(err).__name__}"}, status_code=500)

    def pick(name: str, task: str) -> ServedModel:
        model = served.get(name)
        if model is None:
            raise ApiError(404, f"model: no loaded model named {name!r} (loaded: {', '.join(sorted(served))})")
        if model.task != task:
            raise ApiError(422, f"model: {name!r} is a {model.task} model, not a {task} one")
        return model

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "models": sorted(served)}

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"models": [m.describe() for m in served.values()]}

    @app.post("/v1/translate")
    async def translate(req: TranslateRequest, request: Request) -> dict[str, Any]:
        start = time.perf_counter()
        model = pick(req.model, "translation")
        options, prefixes = _decoding_of(req, model)
        tokens = model.count_tokens(req.texts)
        found = await submit_unless_gone(request, batchers[model.name],
                                         (list(req.texts), options, req.split, prefixes), tokens=tokens)
        metrics.sentences[model.name] += len(req.texts)
        out = [_translation_row(t, nbest=req.nbest is not None) for t in found]
        return {"model": model.name, "translations": out,
                "timing": {"total_ms": round((time.perf_counter() - start) * 1000, 3)}}

    @app.post("/v1/classify")
    async def classify(req: ClassifyRequest, request: Request) -> dict[str, Any]:
        start = time.perf_counter()
        model = pick(req.model, "classification")
        rows = await submit_unless_gone(request, batchers[model.name], list(req.texts),
                                        tokens=model.count_tokens(req.texts))
        metrics.sentences[model.name] += len(req.texts)
        return {"model": model.name, "results": [{"text": t, **r} for t, r in zip(req.texts, rows, strict=True)],
                "multi_label": bool(model.classifier.multi_label), "thresholds": model.thresholds(),
                "timing": {"total_ms": round((time.perf_counter() - start) * 1000, 3)}}

    @app.post("/v1/attention")
    async def attention(req: AttentionRequest) -> dict[str, Any]:
        from transformer.visualization.sentence import sentence_attention

        model = served.get(req.model)
        if model is None:
            pick(req.model, "translation")  # raises the 404
        if req.target is not None and model.task != "translation":
            raise ApiError(422, "target: only a translation model has a target")

        text, sentences = req.text, [req.text]
        if model.task == "translation" and req.target is None:  # one sentence at a time
            from transformer.inference.lines import nth_sentence

            try:
                text, sentences = nth_sentence(req.text, req.sentence,
                                               lang=model.loaded.record.languages[0])
            except ValueError as err:
                raise ApiError(422, f"sentence: {err}") from None
        elif req.sentence != 1:
            raise ApiError(422, "sentence: only a translation model's text without a target is "
                           "split into sentences")

        def work() -> Any:
            return sentence_attention(model.loaded, text, target=req.target)

        try:  # the model's own thread: never two calls on one model at once
            att = await asyncio.get_running_loop().run_in_executor(model.executor, work)
        except InputError as err:
            raise ApiError(422, f"text: {err}") from None
        return {"model": model.name, "task": att.task, "output": att.output,
                "sentence": req.sentence, "sentences": sentences,
                "source_tokens": att.src_tokens, "target_tokens": att.tgt_out_tokens,
                "decoder_input_tokens": att.tgt_in_tokens,
                "attention": {"encoder": _rounded(att.encoder), "decoder": _rounded(att.decoder),
                              "cross": _rounded(att.cross)}}

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"))

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    inner: Any = app
    if settings.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        inner = CORSMiddleware(app, allow_origins=list(settings.cors_origins),
                               allow_methods=["GET", "POST"], allow_headers=["*"])
    guarded = Guard(inner, metrics=metrics, max_body=settings.max_body_bytes, api_key=settings.api_key)
    guarded.fastapi = app  # type: ignore[attr-defined]  # the routes, for tests and tools
    return guarded
