"""The fitted cost of a batch: seconds per request and per source token, against least squares
solved by hand (numpy) on the same weighted batches."""

from __future__ import annotations

import numpy as np
import pytest

from transformer.serving.cost import DECAY, ServiceCost


def reference_fit(batches, decay=DECAY):
    """Weighted least squares of seconds on (requests, tokens), the newest batch weighted 1."""
    x = np.array([[r, t] for r, t, _ in batches], dtype=float)
    y = np.array([s for _, _, s in batches], dtype=float)
    w = decay ** np.arange(len(batches))[::-1]
    return np.linalg.solve(x.T @ (w[:, None] * x), x.T @ (w * y))


def fed(batches, **kw):
    cost = ServiceCost(**kw)
    for requests, tokens, seconds in batches:
        cost.observe(requests=requests, tokens=tokens, seconds=seconds)
    return cost


def test_exact_batches_give_back_both_parts():
    """Batches that cost exactly 4 ms a request and 0.5 ms a token: both parts recovered."""
    batches = [(r, t, 0.004 * r + 0.0005 * t) for r, t in [(1, 10), (4, 12), (2, 60), (8, 80), (3, 9)]]
    cost = fed(batches)
    assert cost.per_request_s == pytest.approx(0.004)
    assert cost.per_token_s == pytest.approx(0.0005)
    assert cost.seconds(requests=10, tokens=100) == pytest.approx(0.09)


def test_noisy_batches_match_weighted_least_squares():
    rng = np.random.default_rng(0)
    batches = [(int(r), int(t), 0.003 * r + 0.001 * t + rng.uniform(0, 0.002))
               for r, t in zip(rng.integers(1, 30, 40), rng.integers(5, 400, 40), strict=True)]
    a, b = reference_fit(batches)
    assert a > 0 and b > 0
    cost = fed(batches)
    assert (cost.per_request_s, cost.per_token_s) == (pytest.approx(a), pytest.approx(b))


def test_newer_batches_weigh_more():
    """The machine got three times slower: after a few batches the cost says so."""
    shapes = [(1, 10), (4, 12), (2, 60), (8, 80)]
    batches = [(r, t, 0.004 * r + 0.0005 * t) for r, t in shapes * 3]
    batches += [(r, t, 3 * (0.004 * r + 0.0005 * t)) for r, t in shapes * 6]
    cost = fed(batches)
    assert cost.seconds(requests=1, tokens=10) == pytest.approx(3 * 0.009, rel=0.02)


def test_batches_of_one_shape_put_the_cost_on_tokens():
    """Every request of 12 tokens: requests and tokens cannot be told apart; tokens carry it."""
    cost = fed([(n, 12 * n, 0.006 * n) for n in (1, 2, 4, 8)])
    assert cost.per_request_s == 0.0
    assert cost.per_token_s == pytest.approx(0.0005)


@pytest.mark.parametrize(("part", "batches"), [
    ("per_token_s", [(1, 10, 0.010), (1, 100, 0.009), (2, 10, 0.020)]),  # all in the requests
    ("per_request_s", [(1, 10, 0.001), (10, 10, 0.0009), (1, 100, 0.01)]),  # all in the tokens
])
def test_neither_part_is_negative(part, batches):
    """Where the unconstrained fit would make one part negative, it is 0 and the other fits alone."""
    cost = fed(batches)
    assert getattr(cost, part) == 0.0
    assert cost.per_request_s >= 0 and cost.per_token_s >= 0
    assert cost.per_request_s + cost.per_token_s > 0


def test_unknown_until_a_batch_and_bad_input():
    cost = ServiceCost()
    assert not cost.known and cost.seconds(requests=1, tokens=1) is None
    with pytest.raises(ValueError, match="decay must be in"):
        ServiceCost(decay=1.0)
    with pytest.raises(ValueError, match="a batch of 0 requests"):
        cost.observe(requests=0, tokens=1, seconds=0.1)
    cost.observe(requests=1, tokens=0, seconds=0.01)  # an empty text still costs its request
    assert cost.per_request_s == pytest.approx(0.01) and cost.per_token_s == 0.0
