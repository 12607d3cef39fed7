"""``POST /v1/translate/stream``: the ``/v1/translate`` request, answered as server-sent events
while its sentences are decoded.

    event: sentence
    data: {"index": 0, "text_index": 0, "sentence": 0, "source": "Two dogs run.", "text": ..., "score": ...}

    event: done
    data: {"model": "en-de", "translations": [...], "timing": {...}}   # what /v1/translate answers

A request of one sentence decoded greedily or sampled once (``beam: 1``, or ``sampling``, no
``nbest`` and no constraints) first gets a ``token`` event per decoded token, its ``text`` the
translation so far (each replaces the last)::

    event: token
    data: {"index": 0, "text_index": 0, "sentence": 0, "step": 3, "text": "Ein Mann fährt"}

Beam search gets none (no prefix of it stays), nor does a request of several sentences (they
are decoded as one batch).

One ``sentence`` event per sentence (or piece of a sentence too long for the model) in order,
rendered as a ``/v1/translate`` translation is, with its place: ``index`` among all the
request's sentences, ``text_index`` the text it belongs to, ``sentence`` its place in that text
(all from 0). Then one ``done`` event with the whole answer. The sentences are decoded in chunks
through the model's queue (:func:`transformer.inference.streaming.chunk_bounds`: the first
sentence alone, so that it comes soon, then the translator's batch size at a time), each chunk
a request of its own there, so the queue's bound, its deadline and the shedding apply to each.

The request is checked, and its first chunk decoded, before the answer starts: a bad request,
a full queue (503) or a deadline passed in the queue (504) is the ordinary ``{"error": ...}``
with its status. After the first event a failure is an ``error`` event (``{"error": ...,
"status": ...}``) and the stream ends. A client that disconnects stops the stream: the chunk
waiting in the queue leaves it and the chunks after it are never queued.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse

from transformer.inference.lines import LinePlan, plan_lines
from transformer.inference.streaming import (
    TokenText,
    chunk_bounds,
    sentence_events,
    token_teller,
    tokens_wanted,
)
from transformer.serving.errors import ApiError
from transformer.serving.models import ServedModel
from transformer.serving.routes import _elapsed_ms, queued, translate_job, watch_disconnect
from transformer.serving.schemas import TranslateRequest

log = logging.getLogger(__name__)
MEDIA_TYPE = "text/event-stream"


def event(kind: str, data: dict[str, Any]) -> str:
    """One server-sent event: its kind and its JSON on one ``data:`` line."""
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


async def translate_stream(req: TranslateRequest, request: Request) -> StreamingResponse:
    """``POST /v1/translate/stream`` (see the module)."""
    start = time.perf_counter()
    if req.format != "text":  # markup is answered whole, by /v1/translate
        raise ApiError(422, f"format: {req.format!r} is not streamed; /v1/translate answers HTML")
    job = translate_job(req, request)
    state, model, options, prefixes, phrases, tag = (job.state, job.model, job.options, job.prefixes,
                                                     job.phrases, job.tag)
    translator = model.translator
    assert translator is not None
    src_lang, tgt_lang = model.loaded.record.languages
    texts = list(req.texts)
    # keyed as the batch keys a /v1/translate request's texts: the same samples for the same seed
    plan = plan_lines(translator, texts, split=req.split, src_lang=src_lang, prefixes=prefixes,
                      keys=list(range(len(texts))),
                      constraints=phrases if phrases and any(phrases) else None, options=options)
    bounds = chunk_bounds(len(plan.units), size=translator.batch_size)
    gone = watch_disconnect(request)

    async def decode(chunk: tuple[int, int], **how: Any) -> list[Any]:
        a, b = chunk
        work = functools.partial(plan.translate, translator, a, b, options=options, source_prefix=tag,
                                 **how)
        return await queued(request, model, None, tokens=model.count_tokens(plan.units[a:b]),
                            timeout_ms=req.timeout_ms, call=work, gone=gone, texts=b - a)

    tokens: asyncio.Queue[Any] | None = None
    try:  # before the answer starts: its refusals are the ordinary ones
        if tokens_wanted(plan, options):
            tokens = asyncio.Queue()
            first_task = asyncio.ensure_future(decode(bounds[0], on_token=_teller(
                tokens, TokenText(translator, 0, *plan.line_of()[0]), gone)))
            first_told = await _started(first_task, tokens)
        else:
            first = await decode(bounds[0]) if bounds else []
    except BaseException:
        gone.cancel()
        if tokens is not None:
            first_task.cancel()
        raise

    async def events() -> AsyncIterator[str]:
        found: list[Any] = []
        try:
            if tokens is not None:  # one sentence: its tokens as they come, then it
                async for told in _told(first_told, tokens):
                    yield event("token", {"index": told.index, "text_index": told.line,
                                          "sentence": told.sentence, "step": told.step,
                                          "text": told.text})
            for k, chunk in enumerate(bounds):
                part = (first_task.result() if tokens is not None else first) if k == 0 \
                    else await decode(chunk)
                found.extend(part)
                for done in sentence_events(plan, chunk[0], part):
                    yield event("sentence", {"index": done.index, "text_index": done.line,
                                             "sentence": done.sentence, "source": done.source,
                                             **done.translation.to_dict(nbest=req.nbest is not None)})
                await asyncio.sleep(0)  # a disconnect that came with the last send is seen here
            answer = await _assembled(request, model, plan, found, tgt_lang=tgt_lang,
                                      options=options, timeout_ms=req.timeout_ms, gone=gone)
            state.metrics.sentences[model.name] += len(texts)
            out = [t.to_dict(nbest=req.nbest is not None, alignments=bool(req.alignments))
                   for t in answer]
            yield event("done", {"model": model.name, "translations": out, "timing": _elapsed_ms(start)})
        except ApiError as err:
            if err.status != 499:  # else nobody is left to tell
                yield event("error", {"error": err.line, "status": err.status})
        except Exception as err:  # a bug: logged, and the client told as /v1/translate tells it
            log.exception("internal error while streaming")
            yield event("error", {"error": f"internal error: {type(err).__name__}", "status": 500})
        finally:
            gone.cancel()
            if tokens is not None:
                first_task.cancel()

    return StreamingResponse(events(), media_type=MEDIA_TYPE,
                             headers={"cache-control": "no-cache", "x-accel-buffering": "no"})


async def _assembled(request: Request, model: ServedModel, plan: LinePlan, found: Sequence[Any], *,
                     tgt_lang: str, options: Any, timeout_ms: int | None,
                     gone: asyncio.Future) -> list[Any]:
    """Every text's translation from its sentences'; word alignments read the model, so with
    them this runs in the model's queue too."""
    work = functools.partial(plan.assemble, model.translator, found, tgt_lang=tgt_lang, options=options)
    if not options.alignments:
        return work()
    return await queued(request, model, None, tokens=model.count_tokens(plan.units),
                        timeout_ms=timeout_ms, call=work, gone=gone)


def _teller(tokens: asyncio.Queue[Any], text: TokenText, gone: asyncio.Future) -> Any:
    """The ``on_token`` of a decode in the model's thread: each token's event handed to the
    event loop's ``tokens`` queue; the decode stops once the client has gone."""
    loop = asyncio.get_running_loop()
    return token_teller(text, lambda found: loop.call_soon_threadsafe(tokens.put_nowait, found),
                        gone.done)


_END = object()  # put after the last token, when the decode is done


async def _started(task: asyncio.Future, tokens: asyncio.Queue[Any]) -> Any:
    """The first of ``task``'s token events (or ``_END``, after which ``task`` holds its
    answer), once it comes; the decode's refusal (a full queue, a deadline passed) raised here,
    before the answer starts. The tokens come in order, then ``_END``: both are handed over by
    the event loop in the order the model's thread sent them."""
    task.add_done_callback(lambda _: tokens.put_nowait(_END))
    first = await tokens.get()
    if first is _END:
        task.result()  # raises its error
    return first


async def _told(first: Any, tokens: asyncio.Queue[Any]) -> AsyncIterator[Any]:
    """The token events from ``first`` on, as they come, until the decode is done."""
    told = first
    while told is not _END:
        yield told
        told = await tokens.get()
