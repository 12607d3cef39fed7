"""The HTTP server: a FastAPI app over models already loaded (so tests run it in-process).

    served = load_served({"en-de": "runs/m30k"})
    app = create_app(served, settings=ServeSettings(max_wait_ms=5))
    uvicorn.run(app, host="127.0.0.1", port=8000)   # or serve_until_stopped(app, ...)

Routes: ``POST /v1/translate``, ``POST /v1/translate/stream`` (server-sent events:
:mod:`transformer.serving.stream`), ``POST /v1/attention``, ``POST /v1/classify``, ``GET /v1/models``,
``POST /v1/admin/reload``, ``GET /health``, ``GET /metrics``, LibreTranslate's ``POST /translate``,
``POST /detect`` and ``GET /languages`` (:mod:`transformer.serving.libretranslate`), the web page at ``/`` (files of
``serving/static``) and the OpenAPI schema at ``/openapi.json``. Every error is a 4xx or 5xx with
``{"error": "one line"}``.

The parts: the settings (:mod:`transformer.serving.settings`), the handlers of each route
(:mod:`transformer.serving.routes`), the error handlers (:mod:`transformer.serving.errors`), one
bounded batcher per model started with the app and drained when it stops (:func:`lifespan`,
:mod:`transformer.serving.state`), reload (:mod:`transformer.serving.reload`), and outermost the
guard (body limit, API keys and their rates, metrics) with CORS inside it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from fastapi.staticfiles import StaticFiles

from transformer.serving.errors import ApiError, add_error_handlers
from transformer.serving.guard import Guard
from transformer.serving.libretranslate import add_libretranslate_routes
from transformer.serving.metrics import Metrics
from transformer.serving.models import ServedModel
from transformer.serving.routes import STATIC, add_routes, submit_unless_gone
from transformer.serving.settings import ServeSettings
from transformer.serving.state import ServerState
from transformer.serving.stream import translate_stream

__all__ = ["ApiError", "ServeSettings", "create_app", "submit_unless_gone"]


def create_app(served: dict[str, ServedModel], *, settings: ServeSettings | None = None) -> Any:
    """The ASGI application over ``served`` (see :func:`transformer.serving.models.load_served`):
    the FastAPI app, wrapped in its guard; the FastAPI app itself is the result's ``fastapi``.
    A reload swaps models in the app's own copy of ``served``, never in the caller's."""
    settings = settings or ServeSettings()
    state = ServerState(served=dict(served), metrics=Metrics(), settings=settings)
    app = FastAPI(title="transformer", version="1", lifespan=lifespan,
                  description="Translate, classify and look inside Transformer models.")
    app.state.server = state
    app.state.settings = settings
    app.state.batchers = state.batchers  # by model name, once started (what a test or a probe inspects)
    add_error_handlers(app)
    add_routes(app)
    app.add_api_route("/v1/translate/stream", translate_stream, methods=["POST"],
                      response_class=StreamingResponse)
    add_libretranslate_routes(app)
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    return _guarded(app, settings=settings, state=state)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """While ``app`` runs, one started batcher per model; when it stops, every request let in is
    answered first."""
    state: ServerState = app.state.server
    state.start()
    yield
    await state.stop()


def _guarded(app: FastAPI, *, settings: ServeSettings, state: ServerState) -> Guard:
    """``app`` behind CORS (when ``settings.cors_origins`` names any) and the :class:`Guard`."""
    inner: Any = app
    if settings.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        inner = CORSMiddleware(app, allow_origins=list(settings.cors_origins),
                               allow_methods=["GET", "POST"], allow_headers=["*"])
    guarded = Guard(inner, metrics=state.metrics, max_body=settings.max_body_bytes, keys=settings.api_keys,
                    every_queue_full=state.every_queue_full, refused_unparsed=state.refused_unparsed,
                    queue_wait_s=settings.max_queue_wait_s)
    guarded.fastapi = app  # type: ignore[attr-defined]  # the routes, for tests and tools
    app.state.guard = guarded  # LibreTranslate's routes check their body's key through it
    return guarded
