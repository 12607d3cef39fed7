"""The repetition guards against Hugging Face's logits processors, and their effect on a search:
with ``no_repeat_ngram`` no n-gram of an output occurs twice; the guards reach the fast path
(packed and int8) and the reference path alike."""

from __future__ import annotations

import math

import pytest
import torch

from transformer.decoding import beam_search, greedy_decode
from transformer.decoding.guards import ban_repeated_ngrams, guarded, penalize_repetitions

transformers = pytest.importorskip("transformers")
from transformers.generation.logits_process import (  # noqa: E402
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
)

PAD, BOS, EOS = 0, 2, 3


def histories(seed: int, rows: int, length: int, vocab: int) -> torch.Tensor:
    """Rows of a few distinct tokens, so that n-grams repeat."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, min(vocab, 8), (rows, length), generator=g)


@pytest.mark.parametrize("length", [1, 2, 3, 6, 12])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_no_repeat_ngram_equals_hugging_face(n, length):
    scores = torch.randn(5, 16, generator=torch.Generator().manual_seed(n * 100 + length))
    history = histories(length, 5, length, 16)
    want = NoRepeatNGramLogitsProcessor(n)(history, scores.clone())
    assert torch.equal(ban_repeated_ngrams(scores, history, n), want)


@pytest.mark.parametrize("penalty", [0.5, 1.3, 2.0])
def test_repetition_penalty_equals_hugging_face(penalty):
    scores = torch.randn(6, 16, generator=torch.Generator().manual_seed(1)) * 3
    scores[:, PAD] = -math.inf  # as the decoders mask it before the guards
    history = histories(2, 6, 7, 16)
    want = RepetitionPenaltyLogitsProcessor(penalty)(history, scores.clone())
    got = penalize_repetitions(scores, history, penalty)
    assert torch.equal(got, want)
    assert guarded(scores, history, no_repeat_ngram=0, repetition_penalty=1.0) is scores


def repeated_ngrams(ids: list[int], n: int) -> bool:
    grams = [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]
    return len(grams) != len(set(grams))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_no_output_repeats_an_ngram(random_model, sources, n):
    model = random_model(n)
    src = sources(30 + n, 8)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=16, no_repeat_ngram=n)
    plain = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=16)
    assert any(repeated_ngrams([BOS, *ids], n) for ids in plain), "the test needs repeats to remove"
    for out in (greedy_decode(model, src, **kw), beam_search(model, src, beam_size=3, **kw)):
        assert not any(repeated_ngrams([BOS, *ids], n) for ids in out)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_guards_cached_equal_uncached(random_model, sources, search):
    model = random_model(4)
    src = sources(40, 7)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=14, no_repeat_ngram=2, repetition_penalty=1.4,
              hypotheses=True)
    run = greedy_decode if search == "greedy" else beam_search
    extra = {} if search == "greedy" else dict(beam_size=3)
    cached = run(model, src, **kw, **extra)
    uncached = run(model, src, use_cache=False, **kw, **extra)
    if search == "beam":
        cached, uncached = [r[0] for r in cached], [r[0] for r in uncached]
    assert [h.ids for h in cached] == [h.ids for h in uncached]
    assert [h.log_prob for h in cached] == pytest.approx([h.log_prob for h in uncached], abs=1e-4)


def test_beam_log_prob_is_the_models_not_the_guarded_score(copy_model, sources):
    """With a penalty the search ranks by guarded log-probabilities; the log-probability it
    reports is still the model's own (forced decoding of the output)."""
    src = sources(41, 6, min_len=4)
    found = beam_search(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=12, beam_size=3,
                        length_penalty=0.0, repetition_penalty=3.0, hypotheses=True, nbest=2)
    for row, hyps in zip(src, found, strict=True):
        for h in hyps:
            tgt = torch.tensor([[BOS, *h.ids, *([EOS] if h.tokens > len(h.ids) else [])]])
            with torch.no_grad():
                log_probs = copy_model(row[row != PAD][None], tgt[:, :-1]).log_softmax(-1)
            assert h.log_prob == pytest.approx(float(log_probs[0].gather(1, tgt[0, 1:, None]).sum()), abs=1e-4)
    assert any(h.score < h.log_prob - 1e-3 for hyps in found for h in hyps), "the penalty should cost"


@pytest.mark.usefixtures("fast_kernels_from_one_row")
@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_guards_on_the_fast_path(copy_model, sources, precision):
    from transformer.decoding.packing import int8_engine

    if precision == "int8" and int8_engine() is None:
        pytest.skip("no quantized engine")
    src = sources(42, 8, min_len=3)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=12, no_repeat_ngram=1, precision=precision)
    for out in (greedy_decode(copy_model, src, **kw), beam_search(copy_model, src, beam_size=2, **kw)):
        assert not any(repeated_ngrams([BOS, *ids], 1) for ids in out)
