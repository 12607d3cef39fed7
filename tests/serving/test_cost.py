"""The fitted cost of a batch: seconds per batch, per request and per source token, against
least squares solved directly (numpy) on the same weighted batches."""

from __future__ import annotations

import numpy as np
import pytest

from transformer.serving.cost import DECAY, ServiceCost


def reference_fit(batches, decay=DECAY):
    """Weighted least squares of seconds on (1, requests, tokens), the newest batch weighted 1."""
    x = np.array([[1, r, t] for r, t, _ in batches], dtype=float)
    y = np.array([s for _, _, s in batches], dtype=float)
    w = decay ** np.arange(len(batches))[::-1]
    return np.linalg.solve(x.T @ (w[:, None] * x), x.T @ (w * y))


def fed(batches, **kw):
    cost = ServiceCost(**kw)
    for requests, tokens, seconds in batches:
        cost.observe(texts=requests, tokens=tokens, seconds=seconds)
    return cost


@pytest.mark.parametrize("per_batch", [0.0, 0.07])
def test_exact_batches_give_back_every_part(per_batch):
    """Batches that cost exactly 4 ms a request and 0.5 ms a token (and 70 ms a batch): every
    part recovered."""
    batches = [(r, t, per_batch + 0.004 * r + 0.0005 * t)
               for r, t in [(1, 10), (4, 12), (2, 60), (8, 80), (3, 9)]]
    cost = fed(batches)
    assert cost.per_batch_s == pytest.approx(per_batch, abs=1e-9)
    assert cost.per_text_s == pytest.approx(0.004)
    assert cost.per_token_s == pytest.approx(0.0005)
    assert cost.seconds(batches=2, texts=10, tokens=100) == pytest.approx(2 * per_batch + 0.09)


def test_noisy_batches_match_weighted_least_squares():
    rng = np.random.default_rng(0)
    batches = [(int(r), int(t), 0.05 + 0.003 * r + 0.001 * t + rng.uniform(0, 0.002))
               for r, t in zip(rng.integers(1, 30, 40), rng.integers(5, 400, 40), strict=True)]
    c, a, b = reference_fit(batches)
    assert a > 0 and b > 0 and c > 0
    cost = fed(batches)
    assert (cost.per_batch_s, cost.per_text_s, cost.per_token_s) == \
        (pytest.approx(c), pytest.approx(a), pytest.approx(b))


def test_newer_batches_weigh_more():
    """The machine got three times slower: after a few batches the cost says so."""
    shapes = [(1, 10), (4, 12), (2, 60), (8, 80)]
    batches = [(r, t, 0.004 * r + 0.0005 * t) for r, t in shapes * 3]
    batches += [(r, t, 3 * (0.004 * r + 0.0005 * t)) for r, t in shapes * 15]
    cost = fed(batches)
    assert cost.seconds(texts=1, tokens=10) == pytest.approx(3 * 0.009, rel=0.02)


def test_batches_of_one_shape_put_the_cost_on_tokens():
    """Every request of 12 tokens: requests and tokens cannot be told apart; tokens carry it (an
    eight-sentence request then costs eight one-sentence ones, not one)."""
    cost = fed([(n, 12 * n, 0.006 * n) for n in (1, 2, 4, 8)])
    assert cost.per_text_s == cost.per_batch_s == 0.0
    assert cost.per_token_s == pytest.approx(0.0005)


def test_one_sentence_requests_with_a_cost_a_batch_do_not_cost_a_long_request_as_a_short_one():
    """What a server under one-sentence requests measures: 70 ms a batch and 0.5 ms a token, the
    tokens of a request varying. The fit finds that, not a cost a request (which would make an
    eight-sentence request as cheap as a one-sentence one)."""
    rng = np.random.default_rng(1)
    batches = []
    for n in (1, 31, 2, 13, 32, 2, 16, 32, 7, 32, 8, 32):
        tokens = int(rng.integers(8, 20, n).sum())
        batches.append((n, tokens, 0.07 + 0.0005 * tokens))
    cost = fed(batches)
    assert cost.per_batch_s == pytest.approx(0.07) and cost.per_token_s == pytest.approx(0.0005)
    assert cost.per_text_s == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize(("part", "batches"), [
    ("per_token_s", [(1, 10, 0.010), (1, 100, 0.009), (2, 10, 0.020), (3, 50, 0.030)]),
    ("per_text_s", [(1, 10, 0.001), (10, 10, 0.0009), (1, 100, 0.01), (5, 50, 0.005)]),
])
def test_neither_part_is_negative(part, batches):
    """Where the unconstrained fit would make one part negative, it is 0 and the other fits alone."""
    cost = fed(batches)
    assert getattr(cost, part) == 0.0
    assert min(cost.per_batch_s, cost.per_text_s, cost.per_token_s) >= 0
    assert cost.per_batch_s + cost.per_text_s + cost.per_token_s > 0


def test_unknown_until_a_batch_and_bad_input():
    cost = ServiceCost()
    assert not cost.known and cost.seconds(texts=1, tokens=1) is None
    with pytest.raises(ValueError, match="decay must be in"):
        ServiceCost(decay=1.0)
    with pytest.raises(ValueError, match="a batch of 0 texts"):
        cost.observe(texts=0, tokens=1, seconds=0.1)
    cost.observe(texts=1, tokens=0, seconds=0.01)  # an empty text still costs its text
    assert cost.per_text_s == pytest.approx(0.01) and cost.per_token_s == cost.per_batch_s == 0.0


def test_batches_of_one_request_put_the_cost_on_the_request():
    """Every batch one request (a lone client, or batching off): a cost a batch and a cost a
    request cannot be told apart; the request carries it, which never undercosts a burst."""
    cost = fed([(1, t, 0.03 + 0.0001 * t) for t in (5, 40, 5, 40, 5)])
    assert cost.per_batch_s == 0.0
    assert cost.per_text_s == pytest.approx(0.03) and cost.per_token_s == pytest.approx(0.0001)
