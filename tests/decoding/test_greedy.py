"""Greedy decoding: the cache changes nothing, batching changes nothing, rows stop where they
should, and the result equals a plain one-sentence-at-a-time reference loop."""

from __future__ import annotations

import pytest
import torch

from transformer.config.decoding import length_limit
from transformer.decoding import greedy_decode

PAD, BOS, EOS = 0, 2, 3


def reference_greedy(model, src_row: torch.Tensor, *, max_len: int) -> list[int]:
    """The obvious loop: one unpadded sentence, the whole prefix through ``model(...)`` each step."""
    src = src_row[src_row != PAD][None] if bool((src_row != PAD).any()) else src_row[None, :1]
    out: list[int] = []
    with torch.no_grad():
        for _ in range(max_len):
            tgt_in = torch.tensor([[BOS, *out]])
            logits = model(src, tgt_in)[0, -1]
            logits[PAD] = float("-inf")
            token = int(logits.argmax())
            if token == EOS:
                break
            out.append(token)
    return out


def test_cached_equals_uncached_trained(copy_model, sources):
    src = sources(0, 12)
    cached = greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=20)
    uncached = greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=20, use_cache=False)
    assert cached == uncached
    lengths = {len(ids) for ids in cached}
    assert max(lengths) > 1 and len(lengths) > 2, "outputs should be non-trivial and vary in length"
    assert max(lengths) < 20, "the trained model should stop at EOS"


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_cached_equals_uncached_random(random_model, sources, seed):
    model = random_model(seed)
    src = sources(seed, 6)
    cached = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=15)
    uncached = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=15, use_cache=False)
    assert cached == uncached
    assert max(len(ids) for ids in cached) > 1


def test_equals_reference_loop_one_sentence_at_a_time(copy_model, sources):
    src = sources(1, 10)
    batched = greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=20)
    for row, ids in zip(src, batched, strict=True):
        assert ids == reference_greedy(copy_model, row, max_len=20)
        assert ids == greedy_decode(copy_model, row[None], bos_id=BOS, eos_id=EOS, max_len=20)[0]


def test_output_has_no_bos_eos_or_pad(copy_model, sources):
    for ids in greedy_decode(copy_model, sources(2, 10), bos_id=BOS, eos_id=EOS, max_len=20):
        assert PAD not in ids and EOS not in ids


def test_absolute_max_len_truncates(copy_model, sources):
    src = sources(3, 10)
    full = greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=20)
    short = greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=3)
    assert short == [ids[:3] for ids in full]


def test_max_len_from_source_length(copy_model, sources):
    src = sources(4, 12)
    a, b = 4.0, -10  # limits -6 to 22 for lengths 1 to 8: rounded up to 0 (so 1), 16 and 32 (cut to 30)
    full = greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=30)
    limited = greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=30, max_len_a=a, max_len_b=b)
    limits = [min(length_limit(int((row != PAD).sum()), a, b), 30) for row in src]
    assert set(limits) == {0, 16, 30}
    for ids_full, ids, limit in zip(full, limited, limits, strict=True):
        assert ids == ids_full[:max(limit, 1)]
    capped = greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=2, max_len_a=a, max_len_b=b)
    assert capped == [ids[:2] for ids in limited]


def test_never_beyond_model_max_len(random_model, sources):
    model = random_model(0)
    with torch.no_grad():
        model.output_projection.bias[EOS] = -100.0  # never stops by itself
    ids = greedy_decode(model, sources(0, 3), bos_id=BOS, eos_id=EOS, max_len=1000)
    assert [len(x) for x in ids] == [model.config.max_len] * 3


def test_min_len_forbids_early_eos(copy_model, sources):
    src = sources(5, 8)
    ids = greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=25, min_len=12)
    assert all(len(x) >= 12 for x in ids)


def test_all_padding_row_and_training_mode_restored(copy_model, sources):
    src = sources(6, 4)
    src[1] = PAD
    copy_model.train()
    copy_model.encoder.layers[0].eval()  # a mixed model: each module gets its own mode back
    modes = [m.training for m in copy_model.modules()]
    try:
        first = greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=10)
        assert copy_model.training, "decoding must restore the model's mode"
        assert [m.training for m in copy_model.modules()] == modes
        assert first == greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=10)
    finally:
        copy_model.eval()


@pytest.mark.parametrize(
    "kwargs",
    [{"max_len": 0}, {"max_len": 5, "min_len": -1}, {"max_len": 5, "max_len_a": -1.0}],
)
def test_bad_arguments(copy_model, sources, kwargs):
    with pytest.raises(ValueError):
        greedy_decode(copy_model, sources(0, 2), bos_id=BOS, eos_id=EOS, **kwargs)


def test_bad_source(copy_model):
    with pytest.raises(ValueError, match="src"):
        greedy_decode(copy_model, torch.ones(5, dtype=torch.long), bos_id=BOS, eos_id=EOS, max_len=5)
    with pytest.raises(ValueError, match="dtype"):
        greedy_decode(copy_model, torch.ones(2, 5), bos_id=BOS, eos_id=EOS, max_len=5)
