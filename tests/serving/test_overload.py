"""The queue under overload: bounded by the wait it implies (503 with Retry-After past it), a
deadline after which a queued request leaves it (504), both counted; tokens accounted to the last
one; and a drain that answers every request let in. The model is held busy with an event, so
what is queued and when is known, not timed."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from transformer.serving.batcher import Batcher, DeadlineExpired, Overloaded
from transformer.serving.cost import ServiceCost


async def until(condition, timeout_s: float = 10.0) -> None:
    """Yield to the event loop until ``condition()`` holds (a margin for a slow machine)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the batcher never got there"
        await asyncio.sleep(0.001)


class Held:
    """A run function that records its batches and holds the one holding "busy" until released."""

    def __init__(self) -> None:
        self.batches: list[list] = []
        self.release = threading.Event()

    def __call__(self, payloads):
        self.batches.append(list(payloads))
        if "busy" in payloads:
            self.release.wait(30)
        return list(payloads)


def with_busy_batcher(body, **kw):
    """Run ``body(batcher, held)`` (a coroutine function) with a started batcher whose model is
    busy with a batch of 5 tokens ("busy") until ``held.release`` is set."""
    held = Held()

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(held, executor=pool, max_wait_s=0.0, **kw)
            batcher.start()
            busy = asyncio.ensure_future(batcher.submit("busy", tokens=5))
            await until(lambda: held.batches == [["busy"]])
            try:
                return await body(batcher, held)
            finally:
                held.release.set()
                await busy
                await batcher.stop()

    return asyncio.run(main())


def costed(batcher, *, per_text_s, per_token_s):
    """Fix ``batcher``'s cost (seconds per text and per token) as if measured."""
    batcher.cost = ServiceCost(per_text_s=per_text_s, per_token_s=per_token_s)


@pytest.mark.parametrize("extra", [0, 1])
def test_a_request_is_let_in_only_if_due_within_the_bound(extra):
    """At 0.2 s a request and 0.1 s a token, a 2-second bound, "busy" (1 request, 5 tokens:
    0.7 s) just begun and "a" (0.7 s) queued: a request of 4 tokens (0.6 s) is due at 2.0 s and
    gets in, one of 5 is not; what was let in is answered, what was refused never runs."""

    async def body(batcher, held):
        costed(batcher, per_text_s=0.2, per_token_s=0.1)
        fake_clock(batcher)
        first = asyncio.ensure_future(batcher.submit("a", tokens=5))
        await until(lambda: batcher.queued == 1)
        assert batcher.implied_wait(4, 1) == pytest.approx(2.0)
        second = batcher.submit("b", tokens=4 + extra)
        if extra:
            with pytest.raises(Overloaded) as refused:
                await second
            # the queue's 1.4 s: retry after 2 (whole seconds, up)
            assert refused.value.retry_after_s == 2
            held.release.set()
            return [await first]
        second = asyncio.ensure_future(second)
        held.release.set()
        return [await first, await second]

    got = with_busy_batcher(body, max_queue_s=2.0)
    assert got == (["a"] if extra else ["a", "b"])


@pytest.mark.parametrize("waited_s", [0.0, 0.5])
def test_the_time_a_request_spent_in_the_server_already_counts(waited_s):
    """Due at 1.6 s from now against a 2-second bound: in when it just came, out when it spent
    0.5 s in the server before reaching the queue (read and checked behind a burst)."""

    async def body(batcher, held):
        costed(batcher, per_text_s=0.2, per_token_s=0.1)
        fake_clock(batcher)
        first = asyncio.ensure_future(batcher.submit("a", tokens=5))
        await until(lambda: batcher.queued == 1)
        second = asyncio.ensure_future(batcher.submit("b", tokens=0, waited_s=waited_s))
        await asyncio.sleep(0)
        held.release.set()
        return await first, await asyncio.gather(second, return_exceptions=True)

    first, (second,) = with_busy_batcher(body, max_queue_s=2.0)
    assert first == "a"
    assert isinstance(second, Overloaded) if waited_s else second == "b"


def test_each_request_admitted_and_not_started_costs_its_own_part():
    """A burst of one-token requests at 0.2 s a request and 0.1 s a token, behind 0.7 s running,
    with a 2-second bound: four (0.3 s each) get in, the fifth would be due at 2.2 s and is
    refused; counted by tokens alone, all twelve would have fitted."""

    async def body(batcher, held):
        costed(batcher, per_text_s=0.2, per_token_s=0.1)
        fake_clock(batcher)
        jobs = [asyncio.ensure_future(batcher.submit(i, tokens=1)) for i in range(12)]
        await asyncio.sleep(0)
        refused = [job for job in jobs if job.done()]
        assert len(refused) == 8 and all(isinstance(job.exception(), Overloaded) for job in refused)
        assert batcher.waiting_requests == batcher.queued == 4
        held.release.set()
        return [await job for job in jobs if job not in refused]

    assert with_busy_batcher(body, max_queue_s=2.0) == [0, 1, 2, 3]


def test_an_empty_queue_takes_any_request_and_before_a_cost_one_batch_budget():
    """Nothing queued: even a request over the bound gets in (else it never would). Before any
    batch was timed the queue holds the batch budget (8 tokens here): 8 in, the 9th out."""

    async def body(batcher, held):
        assert not batcher.cost.known
        big = asyncio.ensure_future(batcher.submit("big", tokens=6))
        await until(lambda: batcher.queued == 1)
        fits = asyncio.ensure_future(batcher.submit("fits", tokens=2))
        await until(lambda: batcher.queued == 2)
        with pytest.raises(Overloaded) as refused:
            await batcher.submit("over", tokens=1)
        assert refused.value.retry_after_s == 1.0  # no cost yet: a second
        held.release.set()
        return await big, await fits

    assert with_busy_batcher(body, max_queue_s=0.001, max_tokens=8) == ("big", "fits")


def fake_clock(batcher):
    """Put ``batcher`` on a clock the test moves (``now[0]``), its running batch begun now."""
    now = [batcher.clock()]
    batcher.clock = lambda: now[0]
    batcher._began = now[0]
    return now


def test_a_running_batch_that_overran_its_cost_slows_the_queue_as_much():
    """At 0.1 s a token (nothing a request), 5 tokens running (0.5 s), a 2-second bound: 0.4 s
    into the batch 0.1 s of it is left, so 1 token queued and 8 more are due at 1.0 s and get
    in; at 1.0 s it ran twice its cost, so the queue's 0.9 s and one token more count 2.0 s (in),
    two tokens more 2.2 s (out)."""

    async def body(batcher, held):
        costed(batcher, per_text_s=0.0, per_token_s=0.1)
        now = fake_clock(batcher)
        a = asyncio.ensure_future(batcher.submit("a", tokens=1))
        await until(lambda: batcher.queued == 1)
        now[0] += 0.4
        assert batcher.implied_wait(8, 1) == pytest.approx(0.1 + 0.9)
        b = asyncio.ensure_future(batcher.submit("b", tokens=8))
        await until(lambda: batcher.queued == 2)
        now[0] += 0.6
        assert batcher.implied_wait(1, 1) == pytest.approx(2 * (0.9 + 0.1))
        with pytest.raises(Overloaded):
            await batcher.submit("c", tokens=2)
        held.release.set()
        return await a, await b

    assert with_busy_batcher(body, max_queue_s=2.0) == ("a", "b")


@pytest.mark.parametrize("waited", [1.999, 2.001])
def test_a_queue_whose_oldest_request_waited_past_the_bound_takes_no_more(waited):
    """Whatever the cost says (a small one here), once the oldest request has waited longer than
    the bound, new ones are refused: just under it still in, just past it out."""

    async def body(batcher, held):
        costed(batcher, per_text_s=0.0, per_token_s=1e-6)
        now = fake_clock(batcher)
        a = asyncio.ensure_future(batcher.submit("a", tokens=1))
        await until(lambda: batcher.queued == 1)
        now[0] += waited
        batcher._began = now[0]  # batches came and went; "a" still waits (e.g. held back)
        assert batcher.oldest_wait() == pytest.approx(waited)
        if waited > 2.0:
            with pytest.raises(Overloaded):
                await batcher.submit("b", tokens=1)
            held.release.set()
            return [await a]
        b = asyncio.ensure_future(batcher.submit("b", tokens=1))
        held.release.set()
        return [await a, await b]

    assert len(with_busy_batcher(body, max_queue_s=2.0)) == (1 if waited > 2.0 else 2)


def test_without_a_bound_the_queue_takes_everything():
    async def body(batcher, held):
        costed(batcher, per_text_s=1e9, per_token_s=1e9)
        jobs = [asyncio.ensure_future(batcher.submit(i, tokens=100)) for i in range(20)]
        await until(lambda: batcher.queued == 20)
        held.release.set()
        return await asyncio.gather(*jobs)

    assert with_busy_batcher(body) == list(range(20))


def test_a_queued_request_leaves_at_its_deadline_a_started_one_runs_on():
    """Behind a busy model: a request with a short deadline leaves the queue (never run), one
    without waits; the busy request, started with a deadline of its own, is answered."""
    held = Held()

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(held, executor=pool, max_wait_s=0.0)
            batcher.start()
            busy = asyncio.ensure_future(batcher.submit("busy", tokens=1, timeout_s=0.01))
            await until(lambda: held.batches == [["busy"]])
            late = asyncio.ensure_future(batcher.submit("late", tokens=3, timeout_s=0.05))
            kept = asyncio.ensure_future(batcher.submit("kept", tokens=4))
            with pytest.raises(DeadlineExpired):
                await late
            await until(lambda: batcher.queued == 1)  # it left the queue
            assert batcher.waiting_tokens == 4
            held.release.set()
            out = await busy, await kept
            await batcher.stop()
            return out

    assert asyncio.run(main()) == ("busy", "kept")
    assert held.batches == [["busy"], ["kept"]]


def test_the_tokens_waiting_come_back_to_zero():
    """Answered, expired and abandoned requests all leave the count (else the bound would shrink
    for ever)."""

    async def body(batcher, held):
        done = asyncio.ensure_future(batcher.submit("done", tokens=2))
        gone = asyncio.ensure_future(batcher.submit("gone", tokens=7))
        await until(lambda: batcher.queued == 2)
        assert (batcher.waiting_tokens, batcher.running_tokens) == (9, 5)
        with pytest.raises(DeadlineExpired):
            await batcher.submit("expired", tokens=3, timeout_s=0.01)
        await until(lambda: batcher.queued == 2)
        assert batcher.waiting_tokens == 9
        gone.cancel()
        await until(lambda: batcher.waiting_tokens == 2 and batcher.queued == 1)
        held.release.set()
        await done
        await until(lambda: batcher.running_tokens == 0)
        return batcher.waiting_tokens, batcher.queued

    assert with_busy_batcher(body) == (0, 0)


def test_stop_with_drain_answers_every_request_let_in():
    held = Held()

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(held, executor=pool, max_wait_s=0.0, max_requests=1)
            batcher.start()
            jobs = [asyncio.ensure_future(batcher.submit(x, tokens=1)) for x in ("busy", "a", "b")]
            await until(lambda: held.batches == [["busy"]])
            stopping = asyncio.ensure_future(batcher.stop(drain=True))
            await asyncio.sleep(0)
            assert not stopping.done()
            held.release.set()
            await stopping
            return [job.result() for job in jobs]

    assert asyncio.run(main()) == ["busy", "a", "b"]


def test_stop_without_drain_fails_what_waits():
    """Nobody waits for ever on a stopped batcher: the running and the queued request fail."""
    held = Held()

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(held, executor=pool, max_wait_s=0.0, max_requests=1)
            batcher.start()
            jobs = [asyncio.ensure_future(batcher.submit(x, tokens=1)) for x in ("busy", "a")]
            await until(lambda: batcher.queued == 1 and held.batches == [["busy"]])
            await batcher.stop()
            held.release.set()
            return await asyncio.gather(*jobs, return_exceptions=True)

    assert [str(e) for e in asyncio.run(main())] == ["the server is stopping"] * 2


def test_a_timed_batch_sets_the_cost_from_the_requests_arrival_on_an_idle_server():
    """A lone request on an idle server: its batch's service time runs from its arrival to its
    answer, so the cost learnt covers at least the model call."""

    def slow(payloads):
        time.sleep(0.05)
        return list(payloads)

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(slow, executor=pool, max_wait_s=0.0)
            batcher.start()
            assert not batcher.cost.known and batcher.implied_wait() is None
            await batcher.submit(1, tokens=7)
            await batcher.stop()
            return batcher.cost.seconds(texts=1, tokens=7)

    assert asyncio.run(main()) >= 0.05


def test_a_busy_servers_batch_is_timed_from_the_last_batchs_end():
    """Three requests queued at once, one a batch: each batch's service time starts when the one
    before it ended, not when its requests arrived (or the third would count all three)."""
    observed = []

    def slow(payloads):
        time.sleep(0.05)
        return list(payloads)

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(slow, executor=pool, max_wait_s=0.0, max_requests=1)
            seen = batcher.cost.observe

            def spy(**batch):
                observed.append(batch["seconds"])
                seen(**batch)

            batcher.cost.observe = spy
            batcher.start()
            await asyncio.gather(*(batcher.submit(i, tokens=1) for i in range(3)))
            await batcher.stop()

    asyncio.run(main())
    assert len(observed) == 3
    assert all(0.05 <= seconds < 0.1 for seconds in observed), observed


def test_a_bad_bound_is_refused():
    with ThreadPoolExecutor(1) as pool, pytest.raises(ValueError, match="max_queue_s must be positive, got 0"):
        Batcher(list, executor=pool, max_queue_s=0)


# --- over HTTP --------------------------------------------------------------------------------


def hold_model(monkeypatch, served, name="numbers", method="translate_batch"):
    """The model's batches wait for the returned event (the first one only); returns (event,
    list of batch sizes)."""
    one, sizes, release = served[name], [], threading.Event()
    run = getattr(one, method)

    def held(payloads):
        sizes.append(len(payloads))
        if len(sizes) == 1:
            release.wait(60)
        return run(payloads)

    monkeypatch.setattr(one, method, held)
    return release, sizes


def wait_for(condition, what, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def metric(client, name, **labels):
    """The value of ``name{labels}`` in /metrics (0 when absent)."""
    text = client.get("/metrics").text
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    series = f"{name}{{{inner}}}" if labels else name
    found = re.search("^" + re.escape(series) + r" (\S+)$", text, re.M)
    return float(found[1]) if found else 0.0


BODY = {"model": "numbers", "texts": ["forty two"], "beam": 1}


def test_a_full_queue_answers_503_with_retry_after(make_client, served, monkeypatch):
    """A busy model whose cost says anything more waits too long: the first queued request is
    let in (the queue was empty), the next gets 503, Retry-After and one JSON line, and the
    metrics count it; the one let in is answered."""
    release, _ = hold_model(monkeypatch, served)
    client = make_client(max_queue_wait_s=0.5)
    batcher = client.app.fastapi.state.batchers["numbers"]
    with ThreadPoolExecutor(2) as pool:
        busy = pool.submit(client.post, "/v1/translate", json=BODY)
        wait_for(lambda: batcher.running_tokens > 0, "the first request never ran")
        queued = pool.submit(client.post, "/v1/translate", json=BODY)
        wait_for(lambda: batcher.queued == 1, "the second request never queued")
        costed(batcher, per_text_s=1e6, per_token_s=1e6)  # any queue is weeks of work
        refused = client.post("/v1/translate", json=BODY)
        assert refused.status_code == 503 and set(refused.json()) == {"error"}
        line = refused.json()["error"]
        assert "'numbers'" in line and "0.5 s" in line and "\n" not in line
        assert int(refused.headers["retry-after"]) >= 1
        assert metric(client, "transformer_shed_total", model="numbers", reason="queue_full") == 1
        assert metric(client, "transformer_queue_requests", model="numbers") == 1
        release.set()
        assert busy.result().status_code == queued.result().status_code == 200


def test_when_every_queue_is_full_a_request_is_refused_unparsed(make_client, served, monkeypatch):
    """Both models busy, each with a request queued and a cost that makes any more too much: a
    request for a queued route gets 503 before its body is even parsed (a body that is not JSON
    gets the 503, not its 400), counted under model "*"; once the queues empty, the same body
    gets its 400 again and the queued requests are answered."""
    held = [hold_model(monkeypatch, served), hold_model(monkeypatch, served, "labels", "classify_batch")]
    client = make_client(max_queue_wait_s=0.5)
    batchers = client.app.fastapi.state.batchers
    bodies = {"/v1/translate": BODY, "/v1/classify": {"model": "labels", "texts": ["seven"]}}
    junk = {"content": b"not json", "headers": {"content-type": "application/json"}}
    with ThreadPoolExecutor(4) as pool:
        busy = [pool.submit(client.post, path, json=body) for path, body in bodies.items()]
        wait_for(lambda: all(sizes for _, sizes in held), "the first requests never ran")
        queued = [pool.submit(client.post, path, json=body) for path, body in bodies.items()]
        wait_for(lambda: all(b.queued == 1 for b in batchers.values()), "never queued")
        for batcher in batchers.values():
            costed(batcher, per_text_s=1e6, per_token_s=1e6)
        refused = client.post("/v1/attention", **junk)
        assert refused.status_code == 503 and int(refused.headers["retry-after"]) >= 1
        assert "every model" in refused.json()["error"]
        assert metric(client, "transformer_shed_total", model="*", reason="queue_full") == 1
        for release, _ in held:
            release.set()
        assert [f.result().status_code for f in busy + queued] == [200] * 4
    assert client.post("/v1/attention", **junk).status_code == 400


@pytest.mark.parametrize("how", ["server", "request", "request under the server's"])
def test_a_request_that_waits_out_its_deadline_gets_504(make_client, served, monkeypatch, how):
    """Behind a busy model, a request whose deadline (the server's --timeout-s, or its own
    shorter timeout_ms; a longer one does not stretch the server's) runs out leaves with 504,
    counted; the busy one is answered."""
    release, sizes = hold_model(monkeypatch, served)
    settings = {"server": {"timeout_s": 0.05}, "request": {},
                "request under the server's": {"timeout_s": 0.05}}[how]
    body = {**BODY, "timeout_ms": 60_000 if how == "request under the server's" else 50} \
        if how != "server" else BODY
    client = make_client(**settings)
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(client.post, "/v1/translate", json={**BODY, "texts": ["seven"]})
        wait_for(lambda: sizes, "the first request never ran")
        late = client.post("/v1/translate", json=body)
        assert late.status_code == 504, late.text
        assert set(late.json()) == {"error"} and "timeout" in late.json()["error"]
        assert metric(client, "transformer_shed_total", model="numbers", reason="deadline") == 1
        release.set()
        assert busy.result().status_code == 200
    assert sizes == [1]  # the late request never ran


def test_attention_waits_in_the_models_queue(make_client, served, monkeypatch):
    """An attention request is queued behind a busy model like any other (so it has a deadline
    too), never run beside a batch."""
    release, sizes = hold_model(monkeypatch, served)
    client = make_client()
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(client.post, "/v1/translate", json=BODY)
        wait_for(lambda: sizes, "the first request never ran")
        late = client.post("/v1/attention", json={"model": "numbers", "text": "seven", "timeout_ms": 30})
        assert late.status_code == 504, late.text
        release.set()
        assert busy.result().status_code == 200
    assert client.post("/v1/attention", json={"model": "numbers", "text": "seven"}).status_code == 200


def test_timeout_ms_must_be_positive(client):
    got = client.post("/v1/translate", json={**BODY, "timeout_ms": 0})
    assert got.status_code == 422 and got.json()["error"].startswith("timeout_ms")


def test_a_request_its_model_would_refuse_is_refused_before_the_route(make_client, served, monkeypatch):
    """Busy model, 0.1 s a text, a 0.5 s bound, one request of one text queued: a request of
    eight texts is refused with 503 by the guard, from its JSON alone (a bad field that the route
    would answer with 422 is never looked at), counted under its model; one of one text still
    fits, so the same bad field gets its 422 from the route."""
    release, _ = hold_model(monkeypatch, served)
    client = make_client(max_queue_wait_s=0.5)
    batcher = client.app.fastapi.state.batchers["numbers"]
    with ThreadPoolExecutor(2) as pool:
        busy = pool.submit(client.post, "/v1/translate", json=BODY)
        wait_for(lambda: batcher.running_tokens > 0, "the first request never ran")
        costed(batcher, per_text_s=0.1, per_token_s=0.0)
        queued = pool.submit(client.post, "/v1/translate", json=BODY)
        wait_for(lambda: batcher.queued == 1, "the second request never queued")
        big = client.post("/v1/translate", json={**BODY, "texts": ["seven"] * 8, "beam": "4"})
        assert big.status_code == 503 and int(big.headers["retry-after"]) >= 1, big.text
        assert big.json()["error"].startswith("model: 'numbers' has more work queued")
        assert metric(client, "transformer_shed_total", model="numbers", reason="queue_full") == 1
        small = client.post("/v1/translate", json={**BODY, "beam": "4"})
        assert small.status_code == 422 and small.json()["error"].startswith("beam")
        release.set()
        assert busy.result().status_code == queued.result().status_code == 200


def test_an_idle_model_takes_any_request_a_busy_one_only_what_is_due_in_time():
    """At 1 s a text against a 0.5 s bound: with a batch running and nothing queued a request is
    refused (it would be due after the batch); once the model is idle, the same request gets in."""

    async def body(batcher, held):
        costed(batcher, per_text_s=1.0, per_token_s=0.0)
        with pytest.raises(Overloaded):
            await batcher.submit("late", tokens=1)
        held.release.set()
        await until(lambda: batcher.running_requests == 0)
        return await batcher.submit("idle", tokens=1)

    assert with_busy_batcher(body, max_queue_s=0.5) == "idle"
