"""Beam search: the cache changes nothing, batching changes nothing, beam 1 is greedy, scores are
the model's length-penalised log-probabilities, it finds what greedy misses, it is exhaustive when
the beam holds every hypothesis, and finished hypotheses are never extended."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch import nn

from transformer import ModelConfig
from transformer.config.decoding import length_limit
from transformer.decoding import beam_search, greedy_decode
from transformer.decoding.beam import gnmt_penalty, top_candidates, vocabulary_chunk
from transformer.model import DecoderCache

PAD, BOS, EOS = 0, 2, 3


class PrefixModel(nn.Module):
    """A stand-in with the model's encode/decode/new_cache interface whose next-token logits are
    a function of the whole target prefix. With a cache it reads the prefix back from the cache
    (stored as keys), so a wrongly reordered cache gives wrong logits. Records every input."""

    def __init__(self, logits_of, *, vocab_size: int, max_len: int) -> None:
        super().__init__()
        self.config = ModelConfig.tiny(vocab_size=vocab_size, max_len=max_len)
        self.logits_of = logits_of  # tuple of produced ids (no BOS) -> (V,) logits
        self.inputs: list[torch.Tensor] = []

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        return torch.zeros(*src.shape, 1)

    def new_cache(self) -> DecoderCache:
        return DecoderCache.empty(1)

    def decode(self, tgt_in, memory, src, *, cache=None):
        self.inputs.append(tgt_in.clone())
        if cache is not None:
            ids = tgt_in.float()[:, None, :, None]  # (B, 1, T, 1)
            keys, _ = cache.self_attention[0].update(ids, ids)
            prefixes = keys[:, 0, :, 0].long()  # (B, L)
        else:
            prefixes = tgt_in
        assert bool((prefixes[:, 0] == BOS).all())
        last = torch.stack([self.logits_of(tuple(p[1:].tolist())) for p in prefixes])  # (B, V)
        return last[:, None, :].expand(-1, tgt_in.size(1), -1)  # (B, T, V)

    def sequence_score(self, ids: list[int], *, alpha: float, ended: bool = True) -> float:
        steps = [*ids, EOS] if ended else ids
        total = sum(
            float(torch.log_softmax(self.logits_of(tuple(steps[:i])), dim=-1)[tok])
            for i, tok in enumerate(steps)
        )
        return total / gnmt_penalty(len(steps), alpha)


def table_logits(table: dict, vocab_size: int):
    """Logits from a table of next-token probabilities per prefix; unlisted tokens get 1e-4."""

    def logits_of(prefix: tuple[int, ...]) -> torch.Tensor:
        probs = torch.full((vocab_size,), 1e-4)
        for token, p in table.get(prefix, {EOS: 0.9}).items():
            probs[token] = p
        return probs.log()

    return logits_of


def random_logits(vocab_size: int, seed: int):
    def logits_of(prefix: tuple[int, ...]) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed * 1_000_003 + hash(prefix) % 1_000_003)
        return 2.0 * torch.randn(vocab_size, generator=g)

    return logits_of


def greedy_trap() -> PrefixModel:
    """Greedy takes 4 (p=.55) and then has no good way on; 5 (p=.44) then EOS (p=.95) is better."""
    table = {
        (): {4: 0.55, 5: 0.44},
        (4,): {4: 0.3, 5: 0.25, 6: 0.2, 7: 0.2, EOS: 0.05},
        (5,): {EOS: 0.95},
    }
    return PrefixModel(table_logits(table, 8), vocab_size=8, max_len=10)


def teacher_forced_score(model, src_row: torch.Tensor, ids: list[int], *, alpha: float) -> float:
    src = src_row[src_row != PAD][None]
    with torch.no_grad():
        log_probs = torch.log_softmax(model(src, torch.tensor([[BOS, *ids]]))[0], dim=-1)
    total = float(log_probs[torch.arange(len(ids) + 1), torch.tensor([*ids, EOS])].sum())
    return total / gnmt_penalty(len(ids) + 1, alpha)


@pytest.mark.parametrize("beam_size", [2, 4])
def test_cached_equals_uncached_trained(copy_model, sources, beam_size):
    src = sources(0, 10)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=20, beam_size=beam_size, nbest=beam_size)
    cached = beam_search(copy_model, src, **kw)
    uncached = beam_search(copy_model, src, use_cache=False, **kw)
    assert [[ids for ids, _ in row] for row in cached] == [[ids for ids, _ in row] for row in uncached]
    for row_c, row_u in zip(cached, uncached, strict=True):
        assert [s for _, s in row_c] == pytest.approx([s for _, s in row_u], abs=1e-4)
    lengths = {len(ids) for row in cached for ids, _ in row}
    assert max(lengths) > 1 and len(lengths) > 2


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_cached_equals_uncached_random(random_model, sources, seed):
    model = random_model(seed)
    src = sources(seed, 5)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=12, beam_size=3, max_len_a=1.0, max_len_b=3)
    cached = beam_search(model, src, nbest=3, **kw)
    uncached = beam_search(model, src, nbest=3, use_cache=False, **kw)
    assert [[ids for ids, _ in row] for row in cached] == [[ids for ids, _ in row] for row in uncached]
    assert max(len(ids) for row in cached for ids, _ in row) > 1
    assert beam_search(model, src, **kw) == [row[0][0] for row in cached]


@pytest.mark.parametrize("use_cache", [True, False])
def test_cache_reordering_with_prefix_model(use_cache):
    """The prefix model reads its history from the cache: beams must carry their own history."""
    model = PrefixModel(random_logits(7, seed=3), vocab_size=7, max_len=6)
    src = torch.ones(3, 2, dtype=torch.long)
    got = beam_search(model, src, bos_id=BOS, eos_id=EOS, max_len=6, beam_size=3, nbest=3,
                      use_cache=use_cache)
    for row in got:
        for ids, score in row:
            ended = len(ids) < 6
            assert score == pytest.approx(model.sequence_score(ids, alpha=0.6, ended=ended), abs=1e-5)


def test_beam_one_equals_greedy(copy_model, random_model, sources):
    for model in (copy_model, random_model(1), random_model(2)):
        for seed in range(3):
            src = sources(seed, 8)
            kw = dict(bos_id=BOS, eos_id=EOS, max_len=18, max_len_a=1.5, max_len_b=2)
            assert beam_search(model, src, beam_size=1, **kw) == greedy_decode(model, src, **kw)


def test_batch_equals_one_sentence_at_a_time(copy_model, sources):
    src = sources(2, 9)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=20, beam_size=4, nbest=2)
    batched = beam_search(copy_model, src, **kw)
    for row, expected in zip(src, batched, strict=True):
        alone = beam_search(copy_model, row[None], **kw)[0]
        assert [ids for ids, _ in alone] == [ids for ids, _ in expected]
        assert [s for _, s in alone] == pytest.approx([s for _, s in expected], abs=1e-4)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_scores_are_penalised_log_probabilities(copy_model, sources, alpha):
    src = sources(3, 6)
    got = beam_search(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=30, beam_size=4, nbest=4,
                      length_penalty=alpha)
    for row, hyps in zip(src, got, strict=True):
        assert len(hyps) == 4
        assert len({tuple(ids) for ids, _ in hyps}) == 4, "n-best hypotheses are distinct"
        scores = [s for _, s in hyps]
        assert scores == sorted(scores, reverse=True)
        for ids, score in hyps:
            assert score == pytest.approx(teacher_forced_score(copy_model, row, ids, alpha=alpha), abs=1e-4)


def test_finds_what_greedy_misses_and_keeps_finished():
    model = greedy_trap()
    src = torch.ones(1, 3, dtype=torch.long)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=10)
    assert greedy_decode(model, src, **kw) == [[4, 4]]
    assert beam_search(model, src, beam_size=1, **kw) == [[4, 4]]
    model.inputs.clear()
    (best,) = beam_search(model, src, beam_size=2, length_penalty=0.0, nbest=2, **kw)
    assert best[0][0] == [5]
    assert best[0][1] == pytest.approx(model.sequence_score([5], alpha=0.0))
    assert best[0][1] > model.sequence_score([4, 4], alpha=0.0)
    # [5] finished on the second step; the search went on and the finished hypothesis was kept
    assert len(model.inputs) == 3


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_a_pool_filled_early_does_not_end_a_likelier_hypothesis(alpha):
    """Beam 2: the empty translation (p=.35) and [4] (p=.012) finish at steps 1 and 2 and fill
    the pool while [4, 6] (p=.58) is still live; the search must go on until it ends (as a
    search that stops on a full pool would not: it returned the empty translation)."""
    table = {(): {4: 0.6, EOS: 0.35}, (4,): {6: 0.97, EOS: 0.02}, (4, 6): {EOS: 0.99}}
    model = PrefixModel(table_logits(table, 8), vocab_size=8, max_len=10)
    (got,) = beam_search(model, torch.ones(1, 3, dtype=torch.long), bos_id=BOS, eos_id=EOS,
                         max_len=10, beam_size=2, length_penalty=alpha, nbest=2)
    assert [ids for ids, _ in got] == [[4, 6], []]
    assert got[0][1] == pytest.approx(model.sequence_score([4, 6], alpha=alpha))
    assert len(model.inputs) == 3  # and it stopped once no live hypothesis could enter the pool
    assert beam_search(model, torch.ones(1, 3, dtype=torch.long), bos_id=BOS, eos_id=EOS,
                       max_len=10, beam_size=2, length_penalty=alpha) == [[4, 6]]


def test_exhaustive_when_the_beam_holds_everything():
    """With a beam larger than the number of hypotheses, the n-best list is the brute-force one."""
    vocab, max_len = 6, 3
    model = PrefixModel(random_logits(vocab, seed=7), vocab_size=vocab, max_len=max_len)
    words = [t for t in range(vocab) if t not in (PAD, EOS)]
    candidates = [
        (list(ids), model.sequence_score(list(ids), alpha=0.6, ended=n < max_len))
        for n in range(max_len + 1)
        for ids in itertools.product(words, repeat=n)
    ]
    expected = sorted(candidates, key=lambda c: -c[1])[:10]
    (got,) = beam_search(model, torch.ones(1, 2, dtype=torch.long), bos_id=BOS, eos_id=EOS,
                         max_len=max_len, beam_size=100, nbest=10)
    assert [ids for ids, _ in got] == [ids for ids, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-5)


@pytest.mark.parametrize("use_cache", [True, False])
def test_finished_hypotheses_are_never_extended(copy_model, sources, use_cache):
    model = PrefixModel(random_logits(8, seed=5), vocab_size=8, max_len=8)
    for m, src in ((model, torch.ones(4, 2, dtype=torch.long)), (Recording(copy_model), sources(4, 6))):
        beam_search(m, src, bos_id=BOS, eos_id=EOS, max_len=8, beam_size=3, use_cache=use_cache)
        assert len(m.inputs) > 1
        for tgt_in in m.inputs:
            assert not bool((tgt_in == EOS).any()), "a hypothesis that ended in EOS was extended"
            assert not bool((tgt_in == PAD).any())


class Recording(nn.Module):
    """A real model that records every decoder input."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.config = model.config
        self.inputs: list[torch.Tensor] = []

    def encode(self, src):
        return self.model.encode(src)

    def new_cache(self):
        return self.model.new_cache()

    def decode(self, tgt_in, memory, src, *, cache=None):
        self.inputs.append(tgt_in.clone())
        return self.model.decode(tgt_in, memory, src, cache=cache)


def test_length_limits_and_min_len(copy_model, sources):
    src = sources(5, 8)
    kw = dict(bos_id=BOS, eos_id=EOS, beam_size=3)
    limited = beam_search(copy_model, src, max_len=20, max_len_a=3.0, max_len_b=-15, **kw)
    limits = [min(length_limit(int((row != PAD).sum()), 3.0, -15), 20) for row in src]
    assert set(limits) == {0, 16}  # 0: below 1, so 1
    for ids, limit in zip(limited, limits, strict=True):
        assert len(ids) <= max(limit, 1)
    assert all(len(ids) == 4 for ids in beam_search(copy_model, src, max_len=4, min_len=4, **kw))
    assert all(len(ids) >= 10 for ids in beam_search(copy_model, src, max_len=20, min_len=10, **kw))


def test_gnmt_penalty():
    assert gnmt_penalty(7, 0.0) == 1.0
    assert gnmt_penalty(7, 0.6) == pytest.approx(2.0**0.6)
    assert math.isclose(gnmt_penalty(1, 1.0), 1.0)


@pytest.mark.parametrize(
    "kwargs",
    [{"beam_size": 0}, {"beam_size": 2, "nbest": 3}, {"nbest": 0}, {"length_penalty": -1.0}],
)
def test_bad_arguments(copy_model, sources, kwargs):
    with pytest.raises(ValueError):
        beam_search(copy_model, sources(0, 2), bos_id=BOS, eos_id=EOS, max_len=5, **kwargs)


@pytest.mark.parametrize(
    "n, k, v, count, chunk",
    [(3, 4, 50, 8, None), (2, 1, 30, 4, None), (2, 5, 3, 10, None),
     (3, 4, 600, 8, 50), (4, 5, 640, 10, 32), (2, 1, 300, 2, 20), (2, 3, 64, 10, 8)],
)
def test_top_candidates_equal_ranking_every_extension(n, k, v, count, chunk):
    """Ranked at once or chunks first (the ``chunk`` cases), with forbidden tokens (-inf) and a
    hypothesis that can never be extended."""
    g = torch.Generator().manual_seed(n * 100 + k * 10 + v)
    log_probs = torch.randn(n, k, v, generator=g).log_softmax(-1)
    log_probs[..., 0] = float("-inf")
    alive = torch.randn(n, k, generator=g)
    if k > 1:
        alive[0, -1] = float("-inf")  # a hypothesis that can never be extended
    scores, beams, tokens = top_candidates(log_probs, alive, count, chunk=chunk)
    every = (alive[:, :, None] + log_probs).view(n, k * v)
    expected, _ = every.topk(min(count, k * v), dim=1)
    torch.testing.assert_close(scores, expected)
    # each (beam, token) pair is a real extension with that score, and none repeats
    picked = alive.gather(1, beams) + log_probs[torch.arange(n)[:, None], beams, tokens]
    torch.testing.assert_close(picked, scores)
    pairs = beams * v + tokens
    assert all(len(set(row.tolist())) == row.numel() for row in pairs)


def test_vocabulary_chunk():
    assert vocabulary_chunk(8000) == 160
    assert vocabulary_chunk(32000) == 160
    assert vocabulary_chunk(3 * 5 * 7 * 11) == 55  # odd divisors only (up to 1155 / 16): nearest 160
    assert vocabulary_chunk(7919) is None  # prime
    assert vocabulary_chunk(256) is None  # too few chunks to be worth it
    with pytest.raises(ValueError, match="divide"):
        top_candidates(torch.zeros(1, 2, 600), torch.zeros(1, 2), 4, chunk=7)
    with pytest.raises(ValueError, match="divide"):  # also where ranking at once would do
        top_candidates(torch.zeros(1, 1, 10), torch.zeros(1, 1), 4, chunk=3)
