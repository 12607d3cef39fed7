"""What the routes of one app share, and how a route finds the model a request names."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from transformer.serving.batcher import Batcher
from transformer.serving.errors import ApiError
from transformer.serving.metrics import Metrics
from transformer.serving.models import ServedModel


@dataclass(frozen=True)
class ServerState:
    """What the routes of one app share. ``batchers`` is the app's own (several apps may serve one
    set of models), filled by model name when the app starts and emptied of work when it stops."""

    served: dict[str, ServedModel]
    metrics: Metrics
    batchers: dict[str, Batcher]


def server_state(request: Request) -> ServerState:
    """The app's models, metrics and batchers (``app.state.server``)."""
    return request.app.state.server


def pick(served: dict[str, ServedModel], name: str, task: str) -> ServedModel:
    """The loaded model ``name`` of ``task``; ApiError 404 when none is, 422 for another task."""
    model = served.get(name)
    if model is None:
        raise ApiError(404, f"model: no loaded model named {name!r} (loaded: {', '.join(sorted(served))})")
    if model.task != task:
        raise ApiError(422, f"model: {name!r} is a {model.task} model, not a {task} one")
    return model
