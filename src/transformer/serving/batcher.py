"""Dynamic batching: concurrent requests for one model are gathered into one model call.

Each model has one queue and one worker task. The worker takes the oldest waiting request, then
keeps taking requests until ``max_wait_s`` has passed since the first one or the next request would
take the batch past ``max_tokens`` source tokens (a request bigger than the budget runs alone).
It stops waiting early once the batch is as big as the biggest of the last 8 batches and nothing
more is queued: a lone client never waits for the window, and under steady load with N clients a
batch waits for about N requests (clients whose answers went out together come back a few
milliseconds apart), without one short batch making the next ones short too.
The batch runs in the model's own worker thread, so the event loop keeps accepting, validating and
answering requests meanwhile, and requests that arrive while the model runs form the next batch.
``max_requests=1`` turns batching off: every request runs alone, in arrival order.

A request whose client went away before its batch started is dropped; one that goes away later
simply has its result thrown away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class Job:
    """One request: its payload for the run function, its source tokens, and its result."""

    payload: Any
    tokens: int
    future: asyncio.Future = field(repr=False)
    queued_at: float = 0.0


class Batcher:
    """Gathers :class:`Job` s for ``run`` (a function of a list of payloads returning one result
    per payload, in order), called in ``executor`` (one thread: the model is used by one batch at a
    time). ``on_batch(size, tokens)`` is told about every batch run (for the metrics)."""

    def __init__(self, run: Callable[[Sequence[Any]], list[Any]], *, executor: ThreadPoolExecutor,
                 max_wait_s: float = 0.01, max_tokens: int = 4096, max_requests: int = 256,
                 on_batch: Callable[[int, int], None] | None = None) -> None:
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be non-negative, got {max_wait_s}")
        if max_tokens < 1 or max_requests < 1:
            raise ValueError(f"max_tokens and max_requests must be positive, got {max_tokens}, {max_requests}")
        self.run = run
        self.executor = executor
        self.max_wait_s = max_wait_s
        self.max_tokens = max_tokens
        self.max_requests = max_requests
        self.on_batch = on_batch
        self._queue: asyncio.Queue[Job] | None = None
        self._worker: asyncio.Task | None = None
        self._held: Job | None = None  # taken from the queue but over the last batch's budget
        self._recent: deque[int] = deque([1], maxlen=8)  # sizes of the last batches

    def start(self) -> None:
        """Start the worker on the running event loop (call from the app's startup)."""
        self._queue = asyncio.Queue()
        self._worker = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None

    async def submit(self, payload: Any, *, tokens: int) -> Any:
        """Queue ``payload`` (``tokens`` source tokens) and wait for its result; the run
        function's exception is raised here for the requests of a failed batch."""
        if self._queue is None:
            raise RuntimeError("the batcher is not started")
        loop = asyncio.get_running_loop()
        job = Job(payload, max(1, tokens), loop.create_future(), time.perf_counter())
        await self._queue.put(job)
        return await job.future

    async def _next_batch(self) -> list[Job]:
        assert self._queue is not None
        first = self._held or await self._queue.get()
        self._held = None
        batch, tokens = [first], first.tokens
        deadline = time.perf_counter() + self.max_wait_s
        while len(batch) < self.max_requests and tokens < self.max_tokens:
            try:
                job = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                if len(batch) >= max(self._recent):  # as many as are likely to come
                    break
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                try:
                    job = await asyncio.wait_for(self._queue.get(), timeout=left)
                except asyncio.TimeoutError:
                    break
            if tokens + job.tokens > self.max_tokens:
                self._held = job
                break
            batch.append(job)
            tokens += job.tokens
        self._recent.append(len(batch))
        return batch

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [job for job in await self._next_batch() if not job.future.done()]
            if not batch:
                continue
            try:
                results = await loop.run_in_executor(self.executor, self.run,
                                                     [job.payload for job in batch])
            except Exception as err:  # a failed batch fails its requests, never the worker
                log.exception("batch of %d failed", len(batch))
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(err)
                continue
            if self.on_batch is not None:
                self.on_batch(len(batch), sum(job.tokens for job in batch))
            for job, result in zip(batch, results, strict=True):
                if not job.future.done():
                    job.future.set_result(result)
