"""Dynamic batching: concurrent requests for one model are gathered into one model call, through
a queue that is bounded and that nobody waits in for ever.

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

The bound (``max_queue_s``) is on when a request's answer is due, not on a count: a request is
let in only if what is left of the running batch, every request let in and not started, and the
request itself would be done within the bound, costed at the server's measured seconds per
batch, per text and per source token (:class:`~transformer.serving.cost.ServiceCost`, fitted
on the recent batches' service times: the server's wall time for each, event loop included, so
that a burst of many requests is costed for its texts as well as its tokens; the queue as one
batch per ``max_tokens`` of its tokens). When the running batch
has already taken longer than its cost says (the machine got busier), everything queued is costed
that much slower. A request past the bound is refused at once (:class:`Overloaded`, with a time
to retry after), as is any request while the oldest one waiting has waited longer than the bound
(what the estimate missed), so the requests let in keep their latency and the memory stays flat
however many clients come; an idle model (nothing queued or running) always takes one. Until a
first batch has been timed, the queue holds one batch's budget. A request still queued when its ``timeout_s`` runs out leaves
the queue (:class:`DeadlineExpired`); one whose batch has started runs to its answer.

A request whose client went away before its batch started is dropped; one that goes away later
simply has its result thrown away. ``stop(drain=True)`` answers every request let in first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from transformer.serving.cost import ServiceCost

log = logging.getLogger(__name__)


class Overloaded(Exception):
    """The queue is full: retry after ``retry_after_s`` seconds (what the queue holds now)."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"the queue is full; retry after {retry_after_s:.0f} s")
        self.retry_after_s = retry_after_s


class DeadlineExpired(Exception):
    """The request waited its whole timeout in the queue and left it unrun."""


@dataclass
class Job:
    """One request: its payload for the run function (or a ``call`` of its own, run alone), its
    source tokens, and its result."""

    payload: Any
    tokens: int
    future: asyncio.Future = field(repr=False)
    texts: int = 1  # what the cost counts a request as (its texts, one at least)
    queued_at: float = 0.0
    call: Callable[[], Any] | None = field(default=None, repr=False)
    started: bool = False  # handed to the model: it runs to its answer
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


class Batcher:
    """Gathers :class:`Job` s for ``run`` (a function of a list of payloads returning one result
    per payload, in order), called in ``executor`` (one thread: the model is used by one batch at a
    time). ``on_batch(size, tokens)`` is told about every batch run (for the metrics);
    ``max_queue_s`` bounds when an admitted request's answer is due (None: unbounded)."""

    def __init__(self, run: Callable[[Sequence[Any]], list[Any]], *, executor: ThreadPoolExecutor,
                 max_wait_s: float = 0.01, max_tokens: int = 4096, max_requests: int = 256,
                 on_batch: Callable[[int, int], None] | None = None,
                 max_queue_s: float | None = None) -> None:
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be non-negative, got {max_wait_s}")
        if max_tokens < 1 or max_requests < 1:
            raise ValueError(f"max_tokens and max_requests must be positive, got {max_tokens}, {max_requests}")
        if max_queue_s is not None and not max_queue_s > 0:
            raise ValueError(f"max_queue_s must be positive, got {max_queue_s}")
        self.run = run
        self.executor = executor
        self.max_wait_s = max_wait_s
        self.max_tokens = max_tokens
        self.max_requests = max_requests
        self.on_batch = on_batch
        self.max_queue_s = max_queue_s
        self.cost = ServiceCost()  # seconds per request and per token of the recent batches
        self.waiting_tokens = 0  # of the requests let in and not yet started
        self.waiting_requests = 0
        self.waiting_texts = 0
        self.running_tokens = 0
        self.running_requests = 0
        self.running_texts = 0
        self.clock = time.perf_counter  # what queue ages and batch times are read on
        self._began = 0.0  # when the server could start on the running batch, on the clock
        self._ended = -math.inf  # when the last batch's answers were handed back
        self._queue: deque[Job] = deque()
        self._arrived: asyncio.Event | None = None
        self._pending: set[asyncio.Future] = set()  # every request let in and not answered
        self._worker: asyncio.Task | None = None
        self._held: Job | None = None  # taken from the queue but over the last batch's budget
        self._recent: deque[int] = deque([1], maxlen=8)  # sizes of the last batches

    @property
    def queued(self) -> int:
        """Requests in the queue, not yet taken by the worker."""
        return len(self._queue)

    def start(self) -> None:
        """Start the worker on the running event loop (call from the app's startup)."""
        self._arrived = asyncio.Event()
        self._worker = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self, *, drain: bool = False) -> None:
        """Stop the worker; with ``drain``, once every request let in has its answer. A request
        still waiting then (without ``drain``) fails with RuntimeError rather than wait for ever."""
        while drain and self._pending and self._worker is not None:
            await asyncio.wait(set(self._pending))
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        for future in list(self._pending):
            if not future.done():
                future.set_exception(RuntimeError("the server is stopping"))

    def implied_wait(self, tokens: int = 0, texts: int = 0) -> float | None:
        """Seconds until the work let in (what is left of the running batch, then every request
        not started) and a request of ``texts`` texts and ``tokens`` tokens more would be done
        (none: ``texts`` 0), at the measured cost, or that much slower as the running batch has
        already overrun its own; None before a first batch has been timed."""
        waiting = self.waiting_tokens + tokens
        # the batches the queue will take: one a batch budget of tokens (none for an empty queue)
        batches = math.ceil(waiting / self.max_tokens) if self.waiting_texts + texts else 0
        queued = self.cost.seconds(batches=batches, texts=self.waiting_texts + texts, tokens=waiting)
        if queued is None:
            return None
        left, slower = 0.0, 1.0
        if self.running_requests:
            running = self.cost.seconds(texts=self.running_texts, tokens=self.running_tokens)
            elapsed = self.clock() - self._began
            left = max(running - elapsed, 0.0)  # type: ignore[operator]
            if running and elapsed > running:
                slower = elapsed / running
        return left + queued * slower

    def oldest_wait(self) -> float:
        """Seconds the oldest request not yet started has waited (0 with none)."""
        oldest = self._held or (self._queue[0] if self._queue else None)
        return self.clock() - oldest.queued_at if oldest is not None else 0.0

    def full(self, tokens: int = 1, texts: int = 1, waited_s: float = 0.0) -> float | None:
        """Seconds to retry after when a request of ``tokens`` tokens and ``texts`` texts (one
        each: any request) that has been ``waited_s`` in the server would be refused now, else
        None."""
        try:
            self._admit(max(1, tokens), max(1, texts), max(0.0, waited_s))
        except Overloaded as err:
            return err.retry_after_s
        return None

    def _admit(self, tokens: int, texts: int, waited_s: float) -> None:
        if self.max_queue_s is None or self.waiting_requests == 0 == self.running_requests:
            return  # an idle model takes any request: else one over the bound never would
        wait = self.implied_wait(tokens, texts)
        if wait is None:
            if self.waiting_tokens + tokens <= self.max_tokens:
                return
        elif waited_s + wait <= self.max_queue_s and self.oldest_wait() <= self.max_queue_s:
            return
        raise Overloaded(max(1.0, math.ceil(self.implied_wait() or 1.0)))

    async def submit(self, payload: Any, *, tokens: int, timeout_s: float | None = None,
                     call: Callable[[], Any] | None = None, waited_s: float = 0.0,
                     texts: int = 1) -> Any:
        """Queue ``payload`` (``tokens`` source tokens) and wait for its result; the run
        function's exception is raised here for the requests of a failed batch. ``call``: run
        this function alone instead, in the model's thread and in queue order (its result or
        exception is the request's). ``waited_s``: how long the request has been in the server
        already (read, checked), counted against the bound and its ``timeout_s``; ``texts``: how
        many texts it holds (what its cost counts besides its tokens; one at least). Raises
        :class:`Overloaded` at once when the queue is full and :class:`DeadlineExpired` when
        ``timeout_s`` passes before the request started."""
        if self._arrived is None:
            raise RuntimeError("the batcher is not started")
        tokens, texts = max(1, tokens), max(1, texts)
        waited_s = max(0.0, waited_s)
        self._admit(tokens, texts, waited_s)
        loop = asyncio.get_running_loop()
        job = Job(payload, tokens, loop.create_future(), texts, self.clock(), call=call)
        self.waiting_tokens += tokens
        self.waiting_requests += 1
        self.waiting_texts += texts
        self._pending.add(job.future)
        job.future.add_done_callback(lambda _: self._finished(job))
        if timeout_s is not None:
            job.timer = loop.call_later(max(0.0, timeout_s - waited_s), self._expire, job)
        self._queue.append(job)
        self._arrived.set()
        return await job.future

    def _expire(self, job: Job) -> None:
        if not job.started and not job.future.done():
            job.future.set_exception(DeadlineExpired(f"waited {self.clock() - job.queued_at:.1f} s"))

    def _finished(self, job: Job) -> None:
        """A request is answered, expired or given up: it leaves the queue and the count."""
        self._pending.discard(job.future)
        if job.timer is not None:
            job.timer.cancel()
        if job.started:
            return
        self.waiting_tokens -= job.tokens
        self.waiting_requests -= 1
        self.waiting_texts -= job.texts
        job.started = True  # never counted again
        if self._held is job:
            self._held = None
        with contextlib.suppress(ValueError):
            self._queue.remove(job)

    async def _get(self, timeout: float | None = None) -> Job | None:
        """The oldest queued request, waiting for one (at most ``timeout`` seconds: None then)."""
        assert self._arrived is not None
        while not self._queue:
            self._arrived.clear()
            if timeout is None:
                await self._arrived.wait()
                continue
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout=timeout)
            except asyncio.TimeoutError:
                return None
        return self._queue.popleft()

    async def _next_batch(self) -> list[Job]:
        first = self._held or await self._get()
        assert first is not None
        self._held = None
        batch, tokens = [first], first.tokens
        if first.call is not None:
            return batch
        deadline = time.perf_counter() + self.max_wait_s
        while len(batch) < self.max_requests and tokens < self.max_tokens:
            if self._queue:
                job = self._queue.popleft()
            else:
                if len(batch) >= max(self._recent):  # as many as are likely to come
                    break
                left = deadline - time.perf_counter()
                if left <= 0 or (job := await self._get(left)) is None:
                    break
            if job.call is not None or tokens + job.tokens > self.max_tokens:
                self._held = job
                break
            batch.append(job)
            tokens += job.tokens
        self._recent.append(len(batch))
        return batch

    def _start(self, batch: list[Job]) -> tuple[int, int]:
        """Mark ``batch`` started (it leaves the waiting count); its tokens and texts."""
        tokens = sum(job.tokens for job in batch)
        texts = sum(job.texts for job in batch)
        for job in batch:
            job.started = True
            if job.timer is not None:
                job.timer.cancel()
        self.waiting_tokens -= tokens
        self.waiting_texts -= texts
        self.waiting_requests -= len(batch)
        self.running_tokens += tokens
        self.running_texts += texts
        self.running_requests += len(batch)
        return tokens, texts

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [job for job in await self._next_batch() if not job.future.done()]
            if not batch:
                continue
            tokens, texts = self._start(batch)
            # the server's time for this batch starts when it could start on it: at the last
            # batch's end, or at its first request's arrival on an idle server
            self._began = begun = max(self._ended, min(job.queued_at for job in batch))
            try:
                if batch[0].call is not None:
                    results = [await loop.run_in_executor(self.executor, batch[0].call)]
                else:
                    results = await loop.run_in_executor(self.executor, self.run,
                                                         [job.payload for job in batch])
            except Exception as err:  # a failed batch fails its requests, never the worker
                if batch[0].call is None:
                    log.exception("batch of %d failed", len(batch))
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(err)
                self._ended = self.clock()
                continue
            finally:
                self.running_tokens -= tokens
                self.running_texts -= texts
                self.running_requests -= len(batch)
            for job, result in zip(batch, results, strict=True):
                if not job.future.done():
                    job.future.set_result(result)
            self._ended = self.clock()
            if batch[0].call is None:
                self.cost.observe(texts=texts, tokens=tokens, seconds=self._ended - begun)
                if self.on_batch is not None:
                    self.on_batch(len(batch), tokens)
