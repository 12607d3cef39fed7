"""What the routes of one app share (the models served now, one batcher each, the metrics, the
settings, the last reload's failures, and the models being retired after a reload), and how a
route finds the model a request names.

Everything here is read and changed on the event loop's thread only (a reload loads in another
thread but swaps here), so a route that looks up a model and its batcher without an ``await``
between the two always gets a matching pair.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from fastapi import Request
from pydantic import BaseModel

from transformer.serving.batcher import Batcher
from transformer.serving.errors import ApiError
from transformer.serving.metrics import Metrics
from transformer.serving.models import ServedModel
from transformer.serving.settings import ServeSettings


@dataclass
class ServerState:
    """One app's state. ``batchers`` is the app's own (several apps may serve one set of models),
    filled by model name when the app starts and drained when it stops; ``reload_errors`` holds,
    per model, why its changed directory failed to load (the old model serving on)."""

    served: dict[str, ServedModel]
    metrics: Metrics
    settings: ServeSettings = field(default_factory=ServeSettings)
    batchers: dict[str, Batcher] = field(default_factory=dict)
    reload_errors: dict[str, str] = field(default_factory=dict)
    retiring: set[asyncio.Task] = field(default_factory=set)
    reloading: asyncio.Lock = field(default_factory=asyncio.Lock)  # one reload at a time

    def start_batcher(self, model: ServedModel) -> Batcher:
        """Start (and keep under ``model.name``) a batcher for ``model``: requests wait up to
        ``max_wait_ms`` for company, or none at all (one request a batch) without batching."""
        settings = self.settings
        run = model.translate_batch if model.task == "translation" else model.classify_batch
        name = model.name

        def on_batch(size: int, tokens: int) -> None:
            self.metrics.batch(name, size, tokens, 0)

        batcher = Batcher(run, executor=model.executor,
                          max_wait_s=settings.max_wait_ms / 1000 if settings.batching else 0.0,
                          max_tokens=settings.max_batch_tokens,
                          max_requests=256 if settings.batching else 1, on_batch=on_batch,
                          max_queue_s=settings.max_queue_wait_s)
        batcher.start()
        self.batchers[name] = batcher
        return batcher

    def start(self) -> None:
        """A started batcher for every model (on the running event loop)."""
        for model in self.served.values():
            self.start_batcher(model)

    def swap(self, new: ServedModel) -> None:
        """Serve ``new`` under its name from now on; the model it replaces answers every request
        already queued for it, then is let go (its memory and thread freed with the last
        reference: another app in this process may still serve it)."""
        old_batcher = self.batchers.get(new.name)
        self.served[new.name] = new
        self.start_batcher(new)
        if old_batcher is not None:
            task = asyncio.ensure_future(old_batcher.stop(drain=True))
            self.retiring.add(task)
            task.add_done_callback(self.retiring.discard)

    def every_queue_full(self) -> float | None:
        """Seconds to retry after when every model's queue would refuse even a one-token request
        (so any request for a model is refused before its body is parsed), else None."""
        waits = [batcher.full() for batcher in self.batchers.values()]
        if not waits or any(wait is None for wait in waits):
            return None
        return min(waits)

    def refused_unparsed(self, path: str, body: bytes, waited_s: float) -> tuple[str, float] | None:
        """For a ``/v1/translate`` or ``/v1/classify`` body: (its model, seconds to retry
        after) when that model's queue would refuse it now, read from the JSON alone (its model
        and its texts, counted as the route counts them), else None (anything the route itself
        should answer: not JSON, no such model, a text not a string, past a limit). Refusing
        here costs a burst's excess a JSON parse and a tokenization, not the whole route."""
        if path not in ("/v1/translate", "/v1/classify"):
            return None
        try:
            found = json.loads(body)
        except ValueError:
            return None
        if not isinstance(found, dict) or not isinstance(found.get("model"), str):
            return None
        model, texts = self.served.get(found["model"]), found.get("texts")
        batcher = self.batchers.get(found["model"])
        if model is None or batcher is None or not isinstance(texts, list) or not texts \
                or len(texts) > self.settings.limits.max_texts \
                or not all(isinstance(t, str) and len(t) <= self.settings.limits.max_chars for t in texts):
            return None
        wait = batcher.full(model.count_tokens(texts), len(texts), waited_s)
        return None if wait is None else (model.name, wait)

    def queues(self) -> dict[str, tuple[int, int]]:
        """Per model: (requests, source tokens) waiting now."""
        return {name: (b.queued, b.waiting_tokens) for name, b in self.batchers.items()}

    async def stop(self) -> None:
        """Answer every request let in (retired models' too), then stop every batcher."""
        for batcher in list(self.batchers.values()):
            await batcher.stop(drain=True)
        if self.retiring:
            await asyncio.wait(set(self.retiring))


def server_state(request: Request) -> ServerState:
    """The app's models, metrics, settings and batchers (``app.state.server``)."""
    return request.app.state.server


def pick(served: dict[str, ServedModel], name: str, task: str) -> ServedModel:
    """The loaded model ``name`` of ``task``; ApiError 404 when none is, 422 for another task."""
    model = served.get(name)
    if model is None:
        raise ApiError(404, f"model: no loaded model named {name!r} (loaded: {', '.join(sorted(served))})")
    if model.task != task:
        raise ApiError(422, f"model: {name!r} is a {model.task} model, not a {task} one")
    return model


def checked(req: BaseModel, request: Request) -> None:
    """Refuse ``req`` with 422 when it passes one of the server's limits (``serve --max-texts``
    and so on), naming the field and the limit; a request with a ``max_len`` field left out gets
    the server's ``--max-output-tokens`` there (the cap holds for every translation)."""
    limits = server_state(request).settings.limits
    line = limits.refusal(iter(req))
    if line is not None:
        raise ApiError(422, line)
    if "max_len" in type(req).model_fields and req.max_len is None:
        req.max_len = limits.max_output_tokens
