"""How the server answers an error: always ``{"error": "one line"}`` with a 4xx (or a 500).

:class:`ApiError` is what a route raises for a request it refuses; :func:`add_error_handlers`
turns it, FastAPI's validation errors, Starlette's 404/405 and any other exception into that one
JSON shape, so a client never has to parse FastAPI's own error bodies.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from transformer.serving.schemas import error_line

log = logging.getLogger(__name__)


class ApiError(Exception):
    """A request the server refuses: HTTP ``status``, one line naming the field, and any headers
    of the answer (``Retry-After`` for a 503)."""

    def __init__(self, status: int, line: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(line)
        self.status = status
        self.line = line
        self.headers = headers


async def _api_error(_: Request, err: ApiError) -> JSONResponse:
    return JSONResponse({"error": err.line}, status_code=err.status, headers=err.headers)


async def _invalid(_: Request, err: RequestValidationError) -> JSONResponse:
    """A body FastAPI could not validate: 400 when it is not JSON at all, else 422."""
    errors = list(err.errors())
    status = 400 if errors and errors[0].get("type") == "json_invalid" else 422
    return JSONResponse({"error": error_line(errors)}, status_code=status)


async def _http(request: Request, err: StarletteHTTPException) -> JSONResponse:
    """Starlette's own refusals; a 404 or 405 names the path, which its detail does not."""
    line = f"{request.url.path}: {err.detail}" if err.status_code in (404, 405) else str(err.detail)
    return JSONResponse({"error": line}, status_code=err.status_code)


async def _internal(_: Request, err: Exception) -> JSONResponse:
    """A bug: logged with its traceback, answered with its type's name only."""
    log.exception("internal error")
    return JSONResponse({"error": f"internal error: {type(err).__name__}"}, status_code=500)


def add_error_handlers(app: FastAPI) -> None:
    """Register on ``app`` the handlers that answer every error as ``{"error": "one line"}``."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _internal)
