"""A burst of concurrent requests, several texts each, far past what the model answers within the
bound: the requests let in are answered within it (their cost counted per text as well as per
token, including the ones let in and not started), the rest are refused at once with 503 and a
Retry-After. The model's time is a sleep of known seconds per request and per token, so the
bound is the model's, not the machine's; the margins leave room for a busy machine."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from transformer.serving.batcher import Batcher, DeadlineExpired, Overloaded

PER_TEXT_S, PER_TOKEN_S = 0.010, 0.001


def slow_model(payloads):
    """Sleeps 10 ms a request (of one text) and 1 ms a token (each payload is its token count)."""
    time.sleep(PER_TEXT_S * len(payloads) + PER_TOKEN_S * sum(payloads))
    return list(payloads)


def test_a_burst_lets_in_only_what_is_due_within_the_bound():
    """Batches of a few shapes teach the cost; then 200 requests of 8 tokens come at once (3.6 s
    of work) against a 0.4 s bound: about 22 are let in, each answered within 1.5 times the
    bound and none expired; the others are refused at once with a time to retry after. Costed by
    tokens alone, about 50 would be let in and the last answered after 0.9 s."""
    bound = 0.4

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(slow_model, executor=pool, max_wait_s=0.0, max_queue_s=bound)
            batcher.start()
            for tokens in (2, 30, 2, 30):
                await batcher.submit(tokens, tokens=tokens)
            await asyncio.gather(*(batcher.submit(t, tokens=t) for t in (4, 40, 4, 40, 4)))
            assert batcher.cost.per_text_s > 0 and batcher.cost.per_token_s > 0

            async def one():
                start = time.perf_counter()
                try:
                    await batcher.submit(8, tokens=8, timeout_s=2 * bound)
                except Overloaded as err:
                    return "shed", err.retry_after_s
                except DeadlineExpired:
                    return "expired", time.perf_counter() - start
                return "answered", time.perf_counter() - start

            found = await asyncio.gather(*(one() for _ in range(200)))
            await batcher.stop()
            return found

    found = asyncio.run(main())
    answered = [s for what, s in found if what == "answered"]
    shed = [s for what, s in found if what == "shed"]
    assert not [f for f in found if f[0] == "expired"]
    assert 10 <= len(answered) <= 30, len(answered)
    assert max(answered) <= 1.5 * bound, sorted(answered)[-5:]
    assert len(shed) == 200 - len(answered) and min(shed) >= 1


BODY = {"model": "numbers", "texts": ["forty two"] * 8, "beam": 1}


def test_a_burst_over_http_answers_the_admitted_on_time(make_client, served, monkeypatch):
    """The tiny model, 5 ms a text more (as a real model's search costs a sentence): after a few
    requests of one and eight texts, 40 clients send eight texts each at once against a 0.3 s
    bound. Every request gets 200 or 503; some of each; every 503 has a Retry-After and one JSON
    line; no answer took longer than the bound and a margin for the clients' threads (all 40 let
    in would take 1.6 s and more)."""
    bound, per_text = 0.3, 0.005
    model = served["numbers"]
    run = model.translate_batch

    def slower(payloads):
        time.sleep(per_text * sum(len(payload[0]) for payload in payloads))
        return run(payloads)

    monkeypatch.setattr(model, "translate_batch", slower)
    client = make_client(max_queue_wait_s=bound)
    for texts in (1, 8, 1, 8, 1):
        assert client.post("/v1/translate", json={**BODY, "texts": BODY["texts"][:texts]}).status_code == 200
    start_line = threading.Barrier(40)

    def one():
        start_line.wait()
        start = time.perf_counter()
        got = client.post("/v1/translate", json=BODY)
        return got, time.perf_counter() - start

    with ThreadPoolExecutor(40) as pool:
        found = list(pool.map(lambda _: one(), range(40)))
    statuses = sorted({got.status_code for got, _ in found})
    assert statuses == [200, 503], statuses
    for got, _ in found:
        if got.status_code == 503:
            assert int(got.headers["retry-after"]) >= 1
            assert set(got.json()) == {"error"} and "\n" not in got.json()["error"]
    waits = sorted(s for got, s in found if got.status_code == 200)
    assert waits[-1] <= bound + 0.6, waits


@pytest.mark.parametrize(("wait", "timeout"), [(1.0, 2.0), (0.5, 1.0), (3.0, 6.0)])
def test_the_deadline_defaults_to_twice_the_bound(wait, timeout):
    """So nothing let in waits in the queue ten times the bound; a deadline given is kept."""
    from transformer.serving.settings import ServeSettings

    assert ServeSettings(max_queue_wait_s=wait).timeout_s == timeout
    assert ServeSettings(max_queue_wait_s=wait, timeout_s=30.0).timeout_s == 30.0
