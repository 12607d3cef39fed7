"""Ensembles against their definition: one member is that model, two identical members are one,
and two different members follow a hand-written search over the mean of their log-softmaxes."""

from __future__ import annotations

import pytest
import torch

from transformer.decoding import beam_search, greedy_decode, sample_decode
from transformer.decoding.ensemble import Ensemble

from .conftest import BOS, EOS

SEARCHES = {
    "greedy": lambda m, src: greedy_decode(m, src, bos_id=BOS, eos_id=EOS, hypotheses=True),
    "beam": lambda m, src: [h for row in beam_search(m, src, bos_id=BOS, eos_id=EOS, beam_size=3,
                                                     nbest=2, hypotheses=True) for h in row],
    "sampling": lambda m, src: [h for row in sample_decode(m, src, bos_id=BOS, eos_id=EOS, seed=7,
                                                           nbest=2, sampling_topk=5) for h in row],
}


def _pairs(found):
    return [(h.ids, h.score, h.log_prob, h.tokens) for h in found]


@pytest.mark.parametrize("search", sorted(SEARCHES))
@pytest.mark.parametrize("use_cache", [True, False])
def test_one_member_is_that_model(random_model, sources, search, use_cache):
    model, src = random_model(0), sources(1, 5)
    run = SEARCHES[search]
    if not use_cache:
        def run(m, s):
            return greedy_decode(m, s, bos_id=BOS, eos_id=EOS, hypotheses=True, use_cache=False)
    assert _pairs(run(Ensemble([model]), src)) == _pairs(run(model, src))


@pytest.mark.parametrize("search", sorted(SEARCHES))
def test_two_identical_members_are_one(random_model, sources, search):
    model, src = random_model(1), sources(2, 6)
    one, two = SEARCHES[search](model, src), SEARCHES[search](Ensemble([model, model]), src)
    assert [h.ids for h in two] == [h.ids for h in one]
    # the mean of two equal log-softmaxes is that log-softmax; the search's own log-softmax of it
    # differs from the model's by the rounding of a normaliser of 1
    assert [h.log_prob for h in two] == pytest.approx([h.log_prob for h in one], abs=1e-5)
    assert [h.score for h in two] == pytest.approx([h.score for h in one], abs=1e-5)


def _reference_greedy(models, src_row, *, limit):
    """Greedy decoding of one source (1, S) by the definition: every step, each model's
    log-softmax over the whole prefix (no cache), their mean, normalised, its argmax (PAD never)."""
    tokens, total = [BOS], 0.0
    for _ in range(limit):
        prefix = torch.tensor([tokens])
        mean = torch.stack([torch.log_softmax(m(src_row, prefix)[0, -1].float(), -1)
                            for m in models]).mean(0)
        scores = torch.log_softmax(mean, -1)
        scores[0] = -float("inf")  # PAD
        best = int(scores.argmax())
        tokens.append(best)
        total += float(scores[best])
        if best == EOS:
            break
    return [t for t in tokens[1:] if t != EOS], total


def test_two_members_follow_the_mean_of_their_log_softmaxes(random_model, sources):
    a, b = random_model(4), random_model(8)  # the same shape, different weights
    a.eval(), b.eval()
    src = sources(3, 4)
    ensemble = greedy_decode(Ensemble([a, b]), src, bos_id=BOS, eos_id=EOS, hypotheses=True, max_len=12)
    alone = [greedy_decode(m, src, bos_id=BOS, eos_id=EOS, hypotheses=True, max_len=12) for m in (a, b)]
    with torch.no_grad():
        for row, found in enumerate(ensemble):
            source = src[row : row + 1]
            source = source[:, : int((source != 0).sum())]
            ids, log_prob = _reference_greedy([a, b], source, limit=12)
            assert found.ids == ids
            assert found.log_prob == pytest.approx(log_prob, abs=1e-4)
    for member in alone:  # it is neither member
        assert [h.log_prob for h in ensemble] != pytest.approx([h.log_prob for h in member], abs=1e-3)


def test_beam_over_two_members_keeps_each_cache_apart(random_model, sources):
    """Beam search with the cache equals beam search recomputing every prefix, for two members."""
    a, b = random_model(4), random_model(8)
    src = sources(5, 6)
    cached = beam_search(Ensemble([a, b]), src, bos_id=BOS, eos_id=EOS, beam_size=4, nbest=3)
    uncached = beam_search(Ensemble([a, b]), src, bos_id=BOS, eos_id=EOS, beam_size=4, nbest=3,
                           use_cache=False)
    for got, want in zip(cached, uncached, strict=True):
        assert [ids for ids, _ in got] == [ids for ids, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-4)


def test_members_must_share_the_target_vocabulary(random_model):
    from transformer import ModelConfig, Transformer

    other = Transformer(ModelConfig.tiny(vocab_size=20, max_len=24))
    with pytest.raises(ValueError, match="ensemble member 2: tgt_vocab_size 20 differs"):
        Ensemble([random_model(0), other])
    with pytest.raises(ValueError, match="at least one"):
        Ensemble([])


def test_positions_are_the_fewest_of_the_members(random_model):
    from transformer import ModelConfig, Transformer

    short = Transformer(ModelConfig.tiny(vocab_size=16, max_len=10))
    assert Ensemble([random_model(0), short]).config.max_len == 10


@pytest.mark.parametrize("members", [1, 2])
def test_int8_members_each_quantize_their_own_weights(random_model, sources, members):
    """int8: each member's decoder quantizes its own weights; one member decodes as that model
    in int8, and two identical ones pick the same tokens."""
    from transformer.decoding.packing import int8_engine

    if int8_engine() is None:
        pytest.skip("no quantized engine for this CPU")
    model, src = random_model(0), sources(6, 5)
    alone = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, precision="int8")
    ensemble = Ensemble([model] * members)
    assert greedy_decode(ensemble, src, bos_id=BOS, eos_id=EOS, precision="int8") == alone
    assert all(d is not None and d.precision == "int8" for d in ensemble.decoders(precision="int8"))
