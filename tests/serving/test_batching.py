"""Dynamic batching: concurrent requests are gathered into one model call within the wait and the
token budget, and each request gets exactly what it gets alone."""

from __future__ import annotations

import asyncio
import math
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from transformer.data.builtin_task import english_number
from transformer.serving.batcher import Batcher


def run_jobs(jobs, **kw):
    """Submit ``jobs`` ((payload, tokens), all at once) to a batcher whose run function records its
    batches; returns (results, batches)."""
    batches = []

    def run(payloads):
        batches.append(list(payloads))
        return [p * 10 for p in payloads]

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(run, executor=pool, **kw)
            batcher.start()
            try:
                return await asyncio.gather(*(batcher.submit(p, tokens=t) for p, t in jobs))
            finally:
                await batcher.stop()

    return asyncio.run(main()), batches


def test_gathers_within_the_token_budget():
    results, batches = run_jobs([(i, 3) for i in range(10)], max_wait_s=0.05, max_tokens=9)
    assert results == [i * 10 for i in range(10)]
    assert [len(b) for b in batches] == [3, 3, 3, 1]
    assert sorted(p for b in batches for p in b) == list(range(10))


async def until(condition, timeout_s: float = 10.0) -> None:
    """Yield to the event loop until ``condition()`` holds (the worker has reached a state), or
    fail after ``timeout_s`` (a margin for a slow machine: these states take microseconds)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the batcher never got there"
        await asyncio.sleep(0.001)


def test_a_lone_request_does_not_wait_for_the_window():
    """A 20-second window: a lone request still runs at once (the test gives it 10 s, where it
    takes milliseconds on this 2-core Zen 4; waiting for the window would time out)."""

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(lambda payloads: [p * 10 for p in payloads], executor=pool,
                              max_wait_s=20.0)
            batcher.start()
            try:
                return await asyncio.wait_for(batcher.submit(5, tokens=1), timeout=10.0)
            finally:
                await batcher.stop()

    assert asyncio.run(main()) == 50


@pytest.mark.parametrize("window", [20.0, 0.9])
def test_waits_for_as_many_as_the_last_batch(window):
    """After a batch of 3, the next waits (within a 20-second window) for 3 requests that come
    one by one, each queued only once the worker has taken the one before, and then runs at
    once (not at the end of the window)."""
    batches = []

    def run(payloads):
        batches.append(list(payloads))
        return list(payloads)

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(run, executor=pool, max_wait_s=window)
            batcher.start()
            first = asyncio.gather(*(batcher.submit(i, tokens=1) for i in range(3)))
            await asyncio.wait_for(first, timeout=10.0)
            later = []
            for i in range(3):
                later.append(asyncio.ensure_future(batcher.submit(10 + i, tokens=1)))
                await asyncio.sleep(0)  # the request is queued
                await until(lambda: batcher.queued == 0)  # and taken by the worker
            await asyncio.wait_for(asyncio.gather(*later), timeout=10.0)
            await batcher.stop()

    asyncio.run(main())
    assert batches == [[0, 1, 2], [10, 11, 12]]


def test_a_request_over_the_budget_runs_alone():
    results, batches = run_jobs([(1, 2), (2, 50), (3, 2)], max_wait_s=0.05, max_tokens=10)
    assert results == [10, 20, 30] and [1] in batches and [2] in batches


def test_batching_off_runs_each_alone():
    _, batches = run_jobs([(i, 1) for i in range(5)], max_wait_s=0.0, max_requests=1)
    assert batches == [[0], [1], [2], [3], [4]]


def test_a_request_whose_client_left_is_dropped():
    seen = []
    release = threading.Event()

    def run(payloads):
        seen.extend(payloads)
        if "busy" in payloads:
            release.wait(30)  # the model is busy while the next requests queue
        return list(payloads)

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(run, executor=pool, max_wait_s=0.1)
            batcher.start()
            busy = asyncio.ensure_future(batcher.submit("busy", tokens=1))
            await until(lambda: seen == ["busy"])
            gone = asyncio.ensure_future(batcher.submit("gone", tokens=1))
            kept = asyncio.ensure_future(batcher.submit("kept", tokens=1))
            await until(lambda: batcher.queued == 2)
            gone.cancel()  # the client disconnected while its request waited
            release.set()
            result = await kept
            await busy
            await batcher.stop()
            return result

    assert asyncio.run(main()) == "kept" and seen == ["busy", "kept"]


def test_a_failing_batch_fails_its_requests_only():
    calls = []

    def run(payloads):
        calls.append(payloads)
        if "bad" in payloads:
            raise RuntimeError("boom")
        return list(payloads)

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(run, executor=pool, max_wait_s=0.0, max_requests=1)
            batcher.start()
            out = await asyncio.gather(batcher.submit("bad", tokens=1), batcher.submit("ok", tokens=1),
                                       return_exceptions=True)
            await batcher.stop()
            return out

    bad, ok = asyncio.run(main())
    assert isinstance(bad, RuntimeError) and ok == "ok"


def test_concurrent_requests_equal_alone(make_client, served, monkeypatch):
    """8 clients at once, with different texts and decoding options: batched (the model is held
    busy with the first batch until the others have queued, so they make one more batch) and
    each answer equal to the same request sent alone with batching off: the same texts, and
    scores equal up to float32 rounding (padding changes the order of a few additions)."""
    requests = [{"model": "numbers", "texts": [english_number(7 + 97 * i), english_number(1000 + i)],
                 "beam": 1 + i % 3, **({"nbest": 2} if i % 3 == 2 else {})} for i in range(8)]
    one, sizes, release = served["numbers"], [], threading.Event()
    translate_batch = one.translate_batch

    def held(payloads):
        sizes.append(len(payloads))
        if len(sizes) == 1:
            release.wait(60)
        return translate_batch(payloads)

    monkeypatch.setattr(one, "translate_batch", held)
    batched = make_client(max_wait_ms=200)
    batcher = batched.app.fastapi.state.batchers["numbers"]
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(batched.post, "/v1/translate", json=body) for body in requests]
        deadline = time.monotonic() + 60
        while not (sizes and sizes[0] + batcher.queued == len(requests)):
            assert time.monotonic() < deadline, "the requests never queued"
            time.sleep(0.005)
        release.set()
        got = [f.result() for f in futures]
    assert sizes == [sizes[0], len(requests) - sizes[0]]
    metrics = batched.get("/metrics").text
    count = int(re.search(r'transformer_batch_requests_count\{model="numbers"\} (\d+)', metrics)[1])
    assert count == len(sizes) == 2
    solo = make_client(batching=False)
    for body, response in zip(requests, got, strict=True):
        assert response.status_code == 200
        got_rows, alone = response.json()["translations"], solo.post("/v1/translate", json=body).json()["translations"]
        assert [r["text"] for r in got_rows] == [r["text"] for r in alone]
        assert [[c["text"] for c in r.get("nbest", [])] for r in got_rows] == \
            [[c["text"] for c in r.get("nbest", [])] for r in alone]
        for g, a in zip(got_rows, alone, strict=True):
            assert (g["score"] is None) == (a["score"] is None)
            assert g["score"] is None or math.isclose(g["score"], a["score"], rel_tol=1e-5)


def test_a_disconnected_client_leaves_the_queue():
    """The route gives up a request whose client disconnected while it waited behind a busy
    model: it leaves the queue at the disconnect (not at a poll) and is never decoded."""
    from transformer.serving.app import ApiError, submit_unless_gone

    seen = []
    release = threading.Event()

    def run(payloads):
        seen.extend(payloads)
        if "busy" in payloads:
            release.wait(30)  # busy until the request below has been given up
        return list(payloads)

    class Client:
        """An ASGI request whose next message, after its body, is the disconnect once ``left``."""

        def __init__(self):
            self.left = asyncio.Event()

        async def receive(self):
            await self.left.wait()
            return {"type": "http.disconnect"}

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(run, executor=pool, max_wait_s=0.0)
            batcher.start()
            busy = asyncio.ensure_future(batcher.submit("busy", tokens=1))
            await until(lambda: seen == ["busy"])
            client = Client()
            gone = asyncio.ensure_future(submit_unless_gone(client, batcher, "gone", tokens=1))
            await until(lambda: batcher.queued == 1)
            await asyncio.sleep(0.05)
            assert not gone.done() and batcher.queued == 1  # waiting, not given up
            client.left.set()
            with pytest.raises(ApiError) as err:
                await gone
            await until(lambda: batcher.queued == 0 and batcher.waiting_tokens == 0)
            release.set()
            await busy
            after = await batcher.submit("after", tokens=1)
            await batcher.stop()
            return err.value.status, after

    assert asyncio.run(main()) == (499, "after") and seen == ["busy", "after"]


def test_classify_batch_gives_each_request_its_own_rows(served):
    """Requests of different sizes classified in one batch: each gets the rows of its own texts,
    equal to the same request classified alone (not the first request's rows again)."""
    requests = [["seven", "one hundred"], ["nine thousand nine hundred"],
                ["forty two", "three", "eighty eight thousand"]]
    model = served["labels"]
    together = model.classify_batch(requests)
    assert [len(rows) for rows in together] == [2, 1, 3]
    for texts, rows in zip(requests, together, strict=True):
        (alone,) = model.classify_batch([texts])
        for got, want in zip(rows, alone, strict=True):
            assert [lab["label"] for lab in got["labels"]] == [lab["label"] for lab in want["labels"]]
            assert got["probabilities"].keys() == want["probabilities"].keys()
            for name, p in want["probabilities"].items():
                assert math.isclose(got["probabilities"][name], p, rel_tol=1e-5, abs_tol=1e-6)
    # the texts differ, so do their probabilities: a row copied from another request would show
    flat = [tuple(row["probabilities"].values()) for rows in together for row in rows]
    assert len(set(flat)) == len(flat)


def test_translate_batch_gives_each_request_its_own_rows(served):
    """As for classification: requests with equal options decoded in one call, each request's
    translations in its own order."""
    model = served["numbers"]
    options = model.default_options(beam_size=1)
    requests = [[english_number(n) for n in (7, 42)], [english_number(365)],
                [english_number(n) for n in (1999, 80808, 12)]]
    together = model.translate_batch([(texts, options) for texts in requests])
    for texts, rows in zip(requests, together, strict=True):
        (alone,) = model.translate_batch([(texts, options)])
        assert [r.text for r in rows] == [r.text for r in alone]


def test_each_options_group_is_decoded_by_the_one_translator_with_its_options(served, monkeypatch):
    """Requests of two options groups (greedy, beam 2 with a tag): each group is one call of the
    model's own translator (never a copy), given that group's options and tag per call, and the
    translator is unchanged after."""
    from transformer.inference.translator import Translator

    model = served["numbers"]
    translator = model.translator
    before = dict(vars(translator))
    calls = []
    real = Translator.translate

    def recorded(self, sentences, **call):
        calls.append((self, call["options"], tuple(call["source_prefix"])))
        return real(self, sentences, **call)

    monkeypatch.setattr(Translator, "translate", recorded)
    greedy, beam = model.default_options(beam_size=1), model.default_options(beam_size=2)
    texts = [english_number(n) for n in (7, 42)]
    model.translate_batch([(texts, greedy), (texts, beam, True, None, (5,)), (texts[:1], greedy)])
    assert [(c[1], c[2]) for c in calls] == [(greedy, ()), (beam, (5,))]
    assert all(c[0] is translator for c in calls)
    assert vars(translator).keys() == before.keys()
    assert all(vars(translator)[k] is v for k, v in before.items() if k != "truncated")


def test_the_documented_defaults_and_bad_settings():
    with ThreadPoolExecutor(1) as pool:
        batcher = Batcher(list, executor=pool)
        assert (batcher.max_wait_s, batcher.max_tokens, batcher.max_requests) == (0.01, 4096, 256)
        Batcher(list, executor=pool, max_wait_s=0.0, max_tokens=1, max_requests=1)  # the least
        for kw, line in ((dict(max_wait_s=-0.5), "max_wait_s must be non-negative, got -0.5"),
                         (dict(max_tokens=0), "max_tokens and max_requests must be positive, got 0, 256"),
                         (dict(max_requests=0), "max_tokens and max_requests must be positive, got 4096, 0")):
            with pytest.raises(ValueError) as bad:
                Batcher(list, executor=pool, **kw)
            assert str(bad.value) == line


def test_submit_before_start_and_stop_without_start_or_twice():
    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(list, executor=pool)
            await batcher.stop()  # never started: nothing to stop
            with pytest.raises(RuntimeError, match="^the batcher is not started$"):
                await batcher.submit(1, tokens=1)
            batcher.start()
            worker = batcher._worker
            await batcher.stop()
            assert worker.cancelled() and batcher._worker is None
            await batcher.stop()

    asyncio.run(main())


def test_batches_run_in_the_models_own_thread():
    threads = []

    def run(payloads):
        threads.append(threading.current_thread().name)
        return list(payloads)

    async def main():
        with ThreadPoolExecutor(1, thread_name_prefix="the-model") as pool:
            batcher = Batcher(run, executor=pool)
            batcher.start()
            await batcher.submit(1, tokens=1)
            await batcher.stop()

    asyncio.run(main())
    assert len(threads) == 1 and threads[0].startswith("the-model")


def test_a_request_counts_its_tokens_and_at_least_one():
    """Three 1-token requests fill a budget of 3 exactly; 0-token requests count as 1."""
    assert run_jobs([(i, 1) for i in range(3)], max_wait_s=0.05, max_tokens=3)[1] == [[0, 1, 2]]
    assert run_jobs([(i, 0) for i in range(4)], max_wait_s=0.05, max_tokens=3)[1] == [[0, 1, 2], [3]]


def test_a_batch_that_waited_out_its_window_runs():
    """After a batch of 3 the next waits for 3, but only for the window: one lone request runs
    when it ends (a 50 ms window; the test gives it 10 s)."""

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(list, executor=pool, max_wait_s=0.05)
            batcher.start()
            await asyncio.gather(*(batcher.submit(i, tokens=1) for i in range(3)))
            got = await asyncio.wait_for(batcher.submit(9, tokens=1), timeout=10.0)
            await batcher.stop()
            return got

    assert asyncio.run(main()) == 9


def test_only_the_last_8_batches_set_the_wait():
    """A batch of 3, then 8 lone ones (each waits out a 50 ms window for 3): the 3 is forgotten,
    so the next lone request runs at once and one queued after the worker took it runs apart."""
    batches = []

    def run(payloads):
        batches.append(list(payloads))
        return list(payloads)

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(run, executor=pool, max_wait_s=0.05)
            batcher.start()
            await asyncio.gather(*(batcher.submit(i, tokens=1) for i in range(3)))
            for i in range(8):
                await batcher.submit(10 + i, tokens=1)
            nine = asyncio.ensure_future(batcher.submit(90, tokens=1))
            await asyncio.sleep(0)
            await until(lambda: batcher.queued == 0)
            ten = asyncio.ensure_future(batcher.submit(91, tokens=1))
            await asyncio.gather(nine, ten)
            await batcher.stop()

    asyncio.run(main())
    assert batches[-2:] == [[90], [91]]


def test_a_failed_batch_is_logged_with_its_size(caplog):
    def run(payloads):
        raise RuntimeError("boom")

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(run, executor=pool, max_wait_s=0.0)
            batcher.start()
            with pytest.raises(RuntimeError):
                await batcher.submit(1, tokens=1)
            await batcher.stop()

    with caplog.at_level("ERROR", logger="transformer.serving.batcher"):
        asyncio.run(main())
    assert [r.getMessage() for r in caplog.records] == ["batch of 1 failed"]
