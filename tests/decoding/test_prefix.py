"""Target prefixes: every output starts with its prefix and goes on as the model would after it;
rows with prefixes of different lengths (or none) decode in one batch as they do alone; cached
equals uncached; the log-probability counts the decoded tokens only."""

from __future__ import annotations

import pytest
import torch

from transformer.decoding import beam_search, greedy_decode, sample_decode

PAD, BOS, EOS = 0, 2, 3


def forced_log_prob(model, row: torch.Tensor, prefix: list[int], rest: list[int], *, eos: bool) -> float:
    """Teacher-forced log-probability of ``rest`` (then EOS when ``eos``) after BOS + ``prefix``."""
    tgt = torch.tensor([[BOS, *prefix, *rest, *([EOS] if eos else [])]])
    with torch.no_grad():
        log_probs = model(row[row != PAD][None], tgt[:, :-1]).log_softmax(-1)[0]  # (T, V)
    chosen = log_probs.gather(1, tgt[0, 1:, None]).squeeze(1)
    return float(chosen[len(prefix):].sum())


def prefixes_for(src: torch.Tensor) -> list[list[int]]:
    """Different lengths in one batch, an empty one among them; words the copy model would not
    put first (the source reversed), so the prefix changes what follows."""
    out = []
    for i, row in enumerate(src):
        words = row[row != PAD].flip(0).tolist()
        out.append(words[: i % 4])
    return out


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_outputs_start_with_their_prefix_and_batch_as_alone(copy_model, sources, search):
    src = sources(50, 9, min_len=3)
    prefixes = prefixes_for(src)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=14, hypotheses=True)
    if search == "beam":
        kw |= dict(beam_size=3)
    run = greedy_decode if search == "greedy" else beam_search

    def best(found):
        return found if search == "greedy" else [row[0] for row in found]

    batched = best(run(copy_model, src, prefixes=prefixes, **kw))
    plain = best(run(copy_model, src, **kw))
    for i, (h, prefix) in enumerate(zip(batched, prefixes, strict=True)):
        assert h.ids[: len(prefix)] == prefix
        alone = best(run(copy_model, src[i : i + 1], prefixes=[prefix], **kw))[0]
        assert alone.ids == h.ids and alone.log_prob == pytest.approx(h.log_prob, abs=1e-4)
        eos = h.tokens > len(h.ids) - len(prefix)
        assert h.tokens == len(h.ids) - len(prefix) + eos
        assert h.log_prob == pytest.approx(
            forced_log_prob(copy_model, src[i], prefix, h.ids[len(prefix):], eos=eos), abs=1e-4)
        if not prefix:
            assert h.ids == plain[i].ids
    assert sum(h.ids != p.ids for h, p in zip(batched, plain, strict=True)) >= 3


@pytest.mark.parametrize("search", ["greedy", "beam", "sampling"])
def test_prefix_cached_equals_uncached(random_model, sources, search):
    model = random_model(5)
    src = sources(51, 8)
    prefixes = [[5, 6, 7][: i % 4] for i in range(8)]
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=12, prefixes=prefixes)
    if search == "greedy":
        cached, uncached = (greedy_decode(model, src, use_cache=c, **kw) for c in (True, False))
    elif search == "beam":
        cached, uncached = (beam_search(model, src, beam_size=3, use_cache=c, **kw) for c in (True, False))
    else:
        cached, uncached = ([[h.ids for h in row] for row in
                             sample_decode(model, src, seed=3, samples=2, use_cache=c, **kw)]
                            for c in (True, False))
    assert cached == uncached


def test_forcing_the_greedy_start_changes_nothing(copy_model, sources):
    """A prefix equal to what greedy decoding produces first is a no-op on the output, and the
    log-probability is the rest's."""
    src = sources(52, 8, min_len=4)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=14, hypotheses=True)
    plain = greedy_decode(copy_model, src, **kw)
    starts = [h.ids[:2] for h in plain]
    forced = greedy_decode(copy_model, src, prefixes=starts, **kw)
    assert [h.ids for h in forced] == [h.ids for h in plain]
    for h, f, start, row in zip(plain, forced, starts, src, strict=True):
        assert f.tokens == h.tokens - len(start)
        assert f.log_prob == pytest.approx(
            h.log_prob - forced_log_prob(copy_model, row, [], start, eos=False), abs=1e-4)


def test_a_prefix_raises_the_limit_to_hold_it(copy_model, sources):
    src = sources(53, 2, min_len=2, max_len=2)
    out = greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=2,
                        prefixes=[[5, 6, 7, 8], []])
    assert out[0][:4] == [5, 6, 7, 8] and len(out[0]) <= 5 and len(out[1]) <= 2
    with pytest.raises(ValueError, match="no room"):
        greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, prefixes=[[5] * 32, []])
    with pytest.raises(ValueError, match="pad id"):
        beam_search(copy_model, src, bos_id=BOS, eos_id=EOS, prefixes=[[5, PAD], []])
    with pytest.raises(ValueError, match="2 sentences"):
        beam_search(copy_model, src, bos_id=BOS, eos_id=EOS, prefixes=[[5]])


@pytest.mark.usefixtures("fast_kernels_from_one_row")
@pytest.mark.parametrize("precision", ["fp32", "int8", "bf16"])
def test_prefixes_and_sampling_on_the_fast_path_at_every_precision(copy_model, sources, precision):
    """Packed float32, int8 and bf16 decoding: outputs start with their prefixes, beam 1 is greedy
    decoding, and top-k 1 sampling is greedy decoding, each at that precision (bf16 aside: its
    logits often tie for the best, and top-k keeps ties, as Hugging Face's does, where greedy
    decoding takes the first; there samples repeat for their seed and keep their prefixes)."""
    import copy

    from transformer.decoding.packing import int8_engine

    if precision == "int8" and int8_engine() is None:
        pytest.skip("no quantized engine")
    model = copy.deepcopy(copy_model).to(torch.bfloat16) if precision == "bf16" else copy_model
    src = sources(54, 8, min_len=3)
    prefixes = prefixes_for(src)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=12, prefixes=prefixes,
              precision="fp32" if precision == "bf16" else precision)
    greedy = greedy_decode(model, src, **kw)
    assert all(ids[: len(p)] == p for ids, p in zip(greedy, prefixes, strict=True))
    assert beam_search(model, src, beam_size=1, **kw) == greedy
    sampled = [row[0].ids for row in sample_decode(model, src, seed=2, top_k=1, **kw)]
    if precision == "bf16":
        assert sampled == [row[0].ids for row in sample_decode(model, src, seed=2, top_k=1, **kw)]
        assert all(ids[: len(p)] == p for ids, p in zip(sampled, prefixes, strict=True))
    else:
        assert sampled == greedy
