"""Sampling against its definitions: the draws follow the model's distribution after temperature,
top-k and top-p exactly as Hugging Face's warpers define them (tested with evenly spread uniform
numbers, and with 20,000 seeded samples and a chi-square test), seeded runs repeat whatever the
batch, top-k 1 is greedy decoding, and each sample's log-probability is the model's."""

from __future__ import annotations

import math

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.decoding import greedy_decode, sample_decode
from transformer.decoding.ranking import vocabulary_chunk
from transformer.decoding.sampling import Sampler, top_k_cut, top_p_cut, uniform_streams

transformers = pytest.importorskip("transformers")
from transformers.generation.logits_process import (  # noqa: E402
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

PAD, BOS, EOS = 0, 2, 3
V = 512  # divisible into 16 chunks of 32: the sampler's two rounds over the vocabulary


def reference(scores: torch.Tensor, *, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """The probabilities Hugging Face samples from: its warpers in its order, then softmax."""
    ids = torch.zeros(scores.size(0), 1, dtype=torch.long)
    scores = TemperatureLogitsWarper(temperature)(ids, scores) if temperature != 1 else scores
    scores = TopKLogitsWarper(top_k)(ids, scores) if top_k else scores
    scores = TopPLogitsWarper(top_p)(ids, scores) if top_p < 1 else scores
    return scores.softmax(-1)


def nucleus_by_definition(probs: torch.Tensor, p: float) -> set[int]:
    """The fewest most probable tokens whose probabilities sum to at least ``p`` (one row)."""
    order = probs.argsort(descending=True).tolist()
    kept, mass = set(), 0.0
    for token in order:
        kept.add(token)
        mass += float(probs[token])
        if mass >= p:
            break
    return kept


def random_logits(rows: int, *, spread: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(rows, V, generator=g) * spread
    scores[:, PAD] = -math.inf  # as the decoders mask it
    return scores


CASES = [  # (temperature, top_k, top_p, spread of the logits)
    (1.0, 0, 1.0, 2.0),  # the whole vocabulary, two rounds over chunks
    (0.5, 0, 1.0, 2.0),  # temperature sharpens
    (2.0, 0, 1.0, 2.0),  # ... and flattens
    (1.0, 7, 1.0, 2.0),  # top-k
    (1.0, 0, 0.8, 4.0),  # top-p, the nucleus among the first candidates
    (1.0, 0, 0.9, 0.5),  # top-p, a flat distribution: the nucleus reaches past them (sorted)
    (0.7, 20, 0.6, 2.0),  # all three
]


@pytest.mark.parametrize("temperature, top_k, top_p, spread", CASES)
def test_draws_follow_the_definitions_exactly(temperature, top_k, top_p, spread):
    """N evenly spread uniform numbers draw each token about N times its probability (within the
    grid's step): what the draw inverts is the definitions' distribution, no more, no less."""
    n = 20_000
    for seed in range(3):
        scores = random_logits(1, spread=spread, seed=seed)
        want = reference(scores.clone(), temperature=temperature, top_k=top_k, top_p=top_p)[0]
        sampler = Sampler(temperature=temperature, top_k=top_k, top_p=top_p, chunk=vocabulary_chunk(V))
        uniforms = (torch.arange(n, dtype=torch.float64) + 0.5) / n
        drawn = sampler.draw(scores.expand(n, V).clone(), uniforms)
        counts = torch.bincount(drawn, minlength=V).double() / n
        assert set(drawn.tolist()) <= set(want.nonzero().squeeze(1).tolist()), "a cut token was drawn"
        assert torch.allclose(counts, want.double(), atol=2.0 / n), "frequencies off the definition"
        kept = (want > 0).nonzero().squeeze(1).tolist()
        if top_p < 1 and not top_k:  # the kept set is the nucleus as defined in words
            probs = (scores / temperature).softmax(-1)[0]
            assert set(kept) == nucleus_by_definition(probs, top_p)
        if top_k and top_p == 1:
            assert len(kept) == top_k


def test_reference_cuts_are_hugging_faces():
    scores = random_logits(8, spread=3.0, seed=5)
    ids = torch.zeros(8, 1, dtype=torch.long)
    assert torch.equal(top_k_cut(scores, 9), TopKLogitsWarper(9)(ids, scores.clone()))
    assert torch.equal(top_p_cut(scores, 0.7), TopPLogitsWarper(0.7)(ids, scores.clone()))
    tied = torch.tensor([[3.0, 2.0, 2.0, 2.0, 1.0]])  # ties with the k-th are kept, as HF keeps them
    assert (top_k_cut(tied, 2) > -math.inf).tolist() == [[True, True, True, True, False]]
    uniforms = (torch.arange(600, dtype=torch.float64) + 0.5) / 600
    drawn = Sampler(top_k=2).draw(tied.expand(600, 5).clone(), uniforms)
    assert set(drawn.tolist()) == {0, 1, 2, 3}


@pytest.fixture(scope="module")
def wide_model() -> Transformer:
    """A random tiny model with a 512-token vocabulary, peaked enough that some tokens are
    frequent and many rare."""
    torch.manual_seed(3)
    model = Transformer(ModelConfig.tiny(vocab_size=V, max_len=16)).eval()
    with torch.no_grad():
        model.output_projection.weight.mul_(8.0)
    return model


def chi_square_p_value(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson's test of ``counts`` against ``probs``, cells expected below 5 pooled into one;
    the p-value from the chi-square distribution's survival function (regularized gamma)."""
    n = float(counts.sum())
    expected = probs.double() * n
    small = expected < 5
    observed = torch.cat([counts.double()[~small], counts.double()[small].sum()[None]])
    expected = torch.cat([expected[~small], expected[small].sum()[None]])
    keep = expected > 0
    assert not bool((observed[~keep] > 0).any()), "a token of probability 0 was drawn"
    statistic = float(((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum())
    df = int(keep.sum()) - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2.0, dtype=torch.float64),
                                         torch.tensor(statistic / 2.0, dtype=torch.float64)))


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, 0, 1.0), (0.8, 0, 0.9), (1.3, 40, 1.0)])
def test_20000_seeded_samples_pass_a_chi_square_test(wide_model, temperature, top_k, top_p):
    """The first token of 20,000 samples (one sentence, 20,000 keys, through the whole decoding
    path) against the model's own next-token distribution under the definitions."""
    src = torch.tensor([[5, 17, 300, 42]])
    with torch.no_grad():
        logits = wide_model(src, torch.tensor([[BOS]]))[:, -1].clone()  # (1, V)
    logits[:, PAD] = -math.inf
    want = reference(logits, temperature=temperature, top_k=top_k, top_p=top_p)[0]
    n = 20_000
    found = sample_decode(wide_model, src.expand(n, -1), bos_id=BOS, eos_id=EOS, seed=11,
                          temperature=temperature, top_k=top_k, top_p=top_p, max_len=1)
    first = torch.tensor([row[0].ids[0] if row[0].ids else EOS for row in found])
    p_value = chi_square_p_value(torch.bincount(first, minlength=V), want)
    assert p_value > 1e-3, f"chi-square p = {p_value:.2g}: the samples do not follow the distribution"


def test_the_chi_square_test_rejects_a_wrong_distribution(wide_model):
    """The test above has power: the same samples against the distribution at another
    temperature fail it."""
    src = torch.tensor([[5, 17, 300, 42]])
    with torch.no_grad():
        logits = wide_model(src, torch.tensor([[BOS]]))[:, -1].clone()
    logits[:, PAD] = -math.inf
    found = sample_decode(wide_model, src.expand(20_000, -1), bos_id=BOS, eos_id=EOS, seed=11, max_len=1)
    first = torch.tensor([row[0].ids[0] if row[0].ids else EOS for row in found])
    wrong = reference(logits, temperature=1.15, top_k=0, top_p=1.0)[0]
    assert chi_square_p_value(torch.bincount(first, minlength=V), wrong) < 1e-3


def test_seeded_samples_repeat_whatever_the_batch(copy_model, sources):
    src = sources(21, 9)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=12, seed=4, samples=3, temperature=1.5)
    batched = sample_decode(copy_model, src, **kw)
    assert batched == sample_decode(copy_model, src, **kw)
    order = [7, 2, 5]
    alone = sample_decode(copy_model, src[order], keys=order, **kw)
    assert [[h.ids for h in row] for row in alone] == [[h.ids for h in batched[i]] for i in order]
    other = sample_decode(copy_model, src, **{**kw, "seed": 5})
    assert [[h.ids for h in r] for r in other] != [[h.ids for h in r] for r in batched]
    assert any(len({tuple(h.ids) for h in row}) > 1 for row in batched), "samples should differ"


@pytest.mark.parametrize("temperature, min_len", [(2.0, 0), (1.0, 0), (1.0, 3)])
def test_samples_cached_equal_uncached_and_log_probs_are_the_models(copy_model, sources, temperature, min_len):
    """Cached equals uncached, and each sample's log-probability is forced decoding's (the
    model's log-softmax, its normaliser over every token, PAD and a forbidden EOS included):
    computed apart at a temperature, on the way of a plain draw."""
    src = sources(22, 6)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=12, seed=9, samples=2, temperature=temperature,
              min_len=min_len)
    cached = sample_decode(copy_model, src, **kw)
    uncached = sample_decode(copy_model, src, use_cache=False, **kw)
    assert [[h.ids for h in r] for r in cached] == [[h.ids for h in r] for r in uncached]
    for row, hyps in zip(src, cached, strict=True):
        assert hyps[0].log_prob >= hyps[1].log_prob  # most probable first
        for h in hyps:
            tgt = torch.tensor([[BOS, *h.ids, *([EOS] if h.tokens > len(h.ids) else [])]])
            with torch.no_grad():
                log_probs = copy_model(row[row != PAD][None], tgt[:, :-1]).log_softmax(-1)
            want = log_probs[0].gather(1, tgt[0, 1:, None]).sum()
            assert h.tokens == tgt.size(1) - 1 and h.score == h.log_prob
            assert h.log_prob == pytest.approx(float(want), abs=1e-4)


def test_top_k_one_is_greedy(copy_model, sources):
    src = sources(23, 10)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=15)
    sampled = sample_decode(copy_model, src, seed=1, top_k=1, temperature=3.0, **kw)
    assert [row[0].ids for row in sampled] == greedy_decode(copy_model, src, **kw)


def test_uniform_streams_depend_on_the_key_alone():
    a = uniform_streams(["x", "y"], seed=3, samples=2, steps=[4, 6])
    b = uniform_streams(["y"], seed=3, samples=2, steps=[6])
    assert a.shape == (4, 6) and torch.equal(a[2:], b)
    assert bool((a[:2, 4:] == 0).all()) and not torch.equal(a[0], a[1])
    assert bool(((b >= 0) & (b < 1)).all())


def test_bad_arguments(copy_model, sources):
    src = sources(24, 2)
    for bad in (dict(samples=0), dict(temperature=0.0), dict(top_k=-1), dict(top_p=0.0),
                dict(keys=[1]), dict(no_repeat_ngram=-1), dict(repetition_penalty=0.0)):
        with pytest.raises(ValueError):
            sample_decode(copy_model, src, bos_id=BOS, eos_id=EOS, seed=0, **bad)
