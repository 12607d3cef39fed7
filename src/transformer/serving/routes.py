"""The server's routes, one handler per endpoint, over the :class:`ServerState` of their app.

Handlers are plain functions that find their models, metrics and batchers on
``request.app.state.server`` (set by :func:`transformer.serving.app.create_app`), so several apps
in one process (tests) each answer from their own. A refused request raises
:class:`~transformer.serving.errors.ApiError`.
"""

from __future__ import annotations

import asyncio
import time
from importlib.resources import files
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, PlainTextResponse

from transformer.errors import InputError
from transformer.serving.batcher import Batcher
from transformer.serving.errors import ApiError
from transformer.serving.models import ServedModel
from transformer.serving.schemas import AttentionRequest, ClassifyRequest, TranslateRequest
from transformer.serving.score import score
from transformer.serving.state import pick, server_state

STATIC = files("transformer.serving") / "static"


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


def _elapsed_ms(start: float) -> dict[str, float]:
    return {"total_ms": round((time.perf_counter() - start) * 1000, 3)}


async def health(request: Request) -> dict[str, Any]:
    return {"status": "ok", "models": sorted(server_state(request).served)}


async def prometheus(request: Request) -> PlainTextResponse:
    return PlainTextResponse(server_state(request).metrics.render(), media_type="text/plain; version=0.0.4")


async def models(request: Request) -> dict[str, Any]:
    return {"models": [m.describe() for m in server_state(request).served.values()]}


async def translate(req: TranslateRequest, request: Request) -> dict[str, Any]:
    start = time.perf_counter()
    state = server_state(request)
    model = pick(state.served, req.model, "translation")
    if req.nbest is not None and req.nbest > req.beam:
        raise ApiError(422, f"nbest: at most beam ({req.beam}), got {req.nbest}")
    options = model.default_options(beam_size=req.beam, nbest=req.nbest,
                                    length_penalty=req.length_penalty, max_len=req.max_len,
                                    alignments=req.alignments)
    tokens = model.count_tokens(req.texts)
    found = await submit_unless_gone(request, state.batchers[model.name],
                                     (list(req.texts), options, req.split), tokens=tokens)
    state.metrics.sentences[model.name] += len(req.texts)
    out = []
    for t in found:
        row: dict[str, Any] = {"text": t.text, "score": t.score, "sentences": t.sentences,
                               "cut_sentences": t.cut}
        if req.nbest is not None:
            row["nbest"] = [{"text": text, "score": score} for text, score in t.nbest]
        if req.alignments:
            row["alignments"] = [list(pair) for pair in t.alignments or []]
        out.append(row)
    return {"model": model.name, "translations": out, "timing": _elapsed_ms(start)}


async def classify(req: ClassifyRequest, request: Request) -> dict[str, Any]:
    start = time.perf_counter()
    state = server_state(request)
    model = pick(state.served, req.model, "classification")
    rows = await submit_unless_gone(request, state.batchers[model.name], list(req.texts),
                                    tokens=model.count_tokens(req.texts))
    state.metrics.sentences[model.name] += len(req.texts)
    return {"model": model.name, "results": [{"text": t, **r} for t, r in zip(req.texts, rows, strict=True)],
            "multi_label": bool(model.classifier.multi_label), "thresholds": model.thresholds(),
            "timing": _elapsed_ms(start)}


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
    if req.target is not None and model.task != "translation":
        raise ApiError(422, "target: only a translation model has a target")
    text, sentences = _attention_text(req, model)

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
    app.add_api_route("/", page, methods=["GET"], include_in_schema=False)
