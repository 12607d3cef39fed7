"""The HTTP server: a FastAPI app over models already loaded (so tests run it in-process).

    served = load_served({"en-de": "runs/m30k"})
    app = create_app(served, settings=ServeSettings(max_wait_ms=5))
    uvicorn.run(app, host="127.0.0.1", port=8000)

Routes: ``POST /v1/translate``, ``POST /v1/attention``, ``POST /v1/classify``, ``GET /v1/models``,
``GET /health``, ``GET /metrics``, the web page at ``/`` (files of ``serving/static``) and the
OpenAPI schema at ``/openapi.json``. Every error is a 4xx (or a 500) with ``{"error": "one line"}``.

The parts: the handlers of each route (:mod:`transformer.serving.routes`), the error handlers
(:mod:`transformer.serving.errors`), one batcher per model started and stopped with the app
(:func:`lifespan`), and outermost the guard (body limit, API key, metrics) with CORS inside it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from transformer.serving.batcher import Batcher
from transformer.serving.errors import ApiError, add_error_handlers
from transformer.serving.guard import Guard
from transformer.serving.metrics import Metrics
from transformer.serving.models import ServedModel
from transformer.serving.routes import STATIC, add_routes, submit_unless_gone
from transformer.serving.state import ServerState

__all__ = ["ApiError", "ServeSettings", "create_app", "submit_unless_gone"]


@dataclass(frozen=True)
class ServeSettings:
    """How the server batches and what it lets in. ``batching=False`` runs every request alone."""

    max_wait_ms: float = 50.0  # longest wait for more requests after the first of a batch
    max_batch_tokens: int = 4096  # source tokens in one batch
    batching: bool = True
    max_body_bytes: int = 1 << 20
    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()


def create_app(served: dict[str, ServedModel], *, settings: ServeSettings | None = None) -> Any:
    """The ASGI application over ``served`` (see :func:`transformer.serving.models.load_served`):
    the FastAPI app, wrapped in its guard; the FastAPI app itself is the result's ``fastapi``."""
    settings = settings or ServeSettings()
    state = ServerState(served=served, metrics=Metrics(), batchers={})
    app = FastAPI(title="transformer", version="1", lifespan=lifespan,
                  description="Translate, classify and look inside Transformer models.")
    app.state.server = state
    app.state.settings = settings
    app.state.batchers = state.batchers  # by model name, once started (what a test or a probe inspects)
    add_error_handlers(app)
    add_routes(app)
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    return _guarded(app, settings=settings, metrics=state.metrics)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """While ``app`` runs, one started :class:`Batcher` per model in its state's ``batchers``."""
    state: ServerState = app.state.server
    start_batchers(state, settings=app.state.settings)
    yield
    for batcher in state.batchers.values():
        await batcher.stop()


def start_batchers(state: ServerState, *, settings: ServeSettings) -> None:
    """Start a batcher for each model of ``state`` into ``state.batchers``: requests wait up to
    ``settings.max_wait_ms`` for company, or none at all (one request a batch) without batching."""
    for model in state.served.values():
        run = model.translate_batch if model.task == "translation" else model.classify_batch
        name = model.name

        def on_batch(size: int, tokens: int, name: str = name) -> None:
            state.metrics.batch(name, size, tokens, 0)

        state.batchers[name] = Batcher(
            run, executor=model.executor,
            max_wait_s=settings.max_wait_ms / 1000 if settings.batching else 0.0,
            max_tokens=settings.max_batch_tokens,
            max_requests=256 if settings.batching else 1, on_batch=on_batch)
        state.batchers[name].start()


def _guarded(app: FastAPI, *, settings: ServeSettings, metrics: Metrics) -> Guard:
    """``app`` behind CORS (when ``settings.cors_origins`` names any) and the :class:`Guard`."""
    inner: Any = app
    if settings.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        inner = CORSMiddleware(app, allow_origins=list(settings.cors_origins),
                               allow_methods=["GET", "POST"], allow_headers=["*"])
    guarded = Guard(inner, metrics=metrics, max_body=settings.max_body_bytes, api_key=settings.api_key)
    guarded.fastapi = app  # type: ignore[attr-defined]  # the routes, for tests and tools
    return guarded
