"""``POST /v1/score``: the log-probability of given translations by forced decoding
(:mod:`transformer.inference.scoring`), over a model the server already holds.

    {"model": "en-de", "sources": ["A dog runs."], "targets": ["Ein Hund rennt."]}
    -> {"model": "en-de", "precision": "fp32", "scores": [{"log_prob": -3.1, "log_prob_per_token": -0.52,
        "tokens": 6, "source_cut": false}], "timing": {"total_ms": 4.2}}

A request runs on its model's own thread (never two calls on one model at once), its pairs
batched by the training batcher; it does not wait for translation batches. Bad requests get a
422 whose ``error`` names the field: ``targets: 3 items, but sources has 2``,
``targets[1]: 300 tokens, more than ...``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.requests import Request as StarletteRequest

from transformer.errors import InputError
from transformer.serving.models import ServedModel
from transformer.serving.schemas import ModelName, Text
from transformer.serving.state import checked, pick, server_state


class ScoreRequest(BaseModel):
    """``POST /v1/score``: ``targets[i]`` scored as the translation of ``sources[i]`` (not queued
    behind translations, so no ``timeout_ms``; the server's ``--max-texts`` and ``--max-chars``
    hold for both lists)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: ModelName
    sources: Annotated[list[Text], Field(min_length=1)]
    targets: Annotated[list[Text], Field(min_length=1)]


def _item(name: str, index: int) -> str:
    return f"{name}[{index}]"


def score_request(model: ServedModel, req: ScoreRequest) -> dict[str, Any]:
    """The answer to ``req`` on ``model`` (call it on the model's thread); InputError naming the
    field for a target the model's positions cannot hold."""
    from transformer.inference.scoring import Scorer, score_pairs

    # int8 is the decoder's fast path: forced decoding reads the float32 weights
    scorer = Scorer(model.loaded, precision="fp32" if model.precision == "int8" else model.precision)
    scores = score_pairs(scorer, req.sources, req.targets, where=_item)
    return {"model": model.name, "precision": scorer.precision,
            "scores": [s.to_dict() for s in scores]}


async def score(req: ScoreRequest, request: StarletteRequest) -> dict[str, Any]:
    """``POST /v1/score`` (registered by :func:`transformer.serving.routes.add_routes`)."""
    start = time.perf_counter()
    checked(req, request)
    model = pick(server_state(request).served, req.model, "translation")
    if len(req.targets) != len(req.sources):
        raise HTTPException(422, f"targets: {len(req.targets)} items, but sources has "
                            f"{len(req.sources)}")
    try:  # the model's own thread: never two calls on one model at once
        answer = await asyncio.get_running_loop().run_in_executor(
            model.executor, score_request, model, req)
    except InputError as err:
        raise HTTPException(422, str(err)) from None
    answer["timing"] = {"total_ms": round((time.perf_counter() - start) * 1000, 3)}
    return answer
