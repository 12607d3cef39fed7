"""The decoding fast path computes what the reference model computes: every step's logits equal
``model.decode`` over the whole prefix, through greedy row removal and beam search's choices of
beams (grouped caches, memory rows shared by a sentence's beams), packed or not."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer.decoding import FastDecoder, beam_search, greedy_decode
from transformer.decoding.fast_decoder import decoder_for
from transformer.decoding.slot_cache import SlotCache
from transformer.decoding.step_cache import StepCache
from transformer.model import KVCache

PAD, BOS, EOS = 0, 2, 3


# The fast path's two arrangements, each forced for a whole search: for many rows (cross-attention
# through the projected memory, beams' caches as slot tables) and for few (projections folded into
# the memory, one cache row per beam).
ARRANGEMENTS = {  # DecodingThresholds fields
    "many rows": dict(fold_max_sentences=0, flat_cache_max_rows=0),
    "few rows": dict(fold_max_sentences=1_000, flat_cache_max_rows=1_000, single_query_rows=1_001),
}


@pytest.fixture(params=list(ARRANGEMENTS))
def arrangement(request, use_thresholds) -> str:
    use_thresholds(**ARRANGEMENTS[request.param])
    return request.param


def reference_logits(model, prefixes: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Next-token logits (R, V) of full prefixes (R, T) through the reference model."""
    return model.decode(prefixes, model.encode(src), src)[:, -1]


@pytest.mark.parametrize("pack", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_greedy_steps_equal_the_reference(random_model, distinct_norms, sources, seed, pack, arrangement, request):
    """Rows of a batch, some leaving on the way: the fast step equals the whole-prefix pass."""
    if pack:
        request.getfixturevalue("fast_kernels_from_one_row")
    model = distinct_norms(random_model(seed))
    src = sources(seed, 5)
    g = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        session = FastDecoder(model, pack_weights=pack).start(src)
        prefixes = torch.full((5, 1), BOS)
        for t in range(8):
            got = session.step(prefixes[:, -1:])
            torch.testing.assert_close(got, reference_logits(model, prefixes, src), atol=1e-4, rtol=1e-4)
            prefixes = torch.cat([prefixes, torch.randint(4, 16, (prefixes.size(0), 1), generator=g)], dim=1)
            if t in (2, 5):  # a row leaves
                keep = torch.arange(1, prefixes.size(0))
                prefixes, src = prefixes[keep], src[keep]
                session.select(keep, keep=keep, beams=1)
        kind = KVCache if arrangement == "many rows" else StepCache  # (a StepCache is a KVCache)
        assert all(type(cache) is kind for cache in session.self_caches)


def test_a_source_of_only_padding_is_never_folded(random_model, distinct_norms, sources, arrangement):
    """The reference gives a row whose source is all padding a zero cross-attention output; folded
    weights would spread it evenly over the padding, so such a batch takes the unfolded path."""
    model = distinct_norms(random_model(0))
    src = sources(0, 3)
    src[1] = PAD
    with torch.inference_mode():
        session = FastDecoder(model).start(src)
        assert session.folded is None
        prefixes = torch.full((3, 1), BOS)
        for _ in range(3):
            got = session.step(prefixes[:, -1:])
            torch.testing.assert_close(got, reference_logits(model, prefixes, src), atol=1e-4, rtol=1e-4)
            prefixes = torch.cat([prefixes, got.argmax(-1, keepdim=True)], dim=1)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_beam_steps_equal_the_reference(random_model, distinct_norms, sources, seed, arrangement):
    """Beam search's steps: one row per sentence first, then K beams per sentence chosen at
    random from the sentence's previous beams, a sentence leaving now and then."""
    model = distinct_norms(random_model(seed))
    n, k = 4, 3
    src = sources(seed, n)
    g = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        session = FastDecoder(model).start(src)
        prefixes = torch.full((n, 1), BOS)  # (N * K_old, T)
        per = 1
        for t in range(9):
            got = session.step(prefixes[:, -1:])
            rows_src = src.repeat_interleave(per, dim=0)
            torch.testing.assert_close(got, reference_logits(model, prefixes, rows_src), atol=1e-4, rtol=1e-4)
            sentences = torch.arange(src.size(0))
            keep = None
            if t in (3, 6):  # a sentence is done
                keep = sentences[sentences != t % src.size(0)]
                sentences, src = keep, src[keep]
            index = (sentences[:, None] * per + torch.randint(0, per, (sentences.numel(), k), generator=g)).view(-1)
            prefixes = torch.cat([prefixes[index], torch.randint(4, 16, (index.numel(), 1), generator=g)], dim=1)
            session.select(index, keep=keep, beams=k)
            per = k
        kind = SlotCache if arrangement == "many rows" else StepCache
        assert all(type(cache) is kind for cache in session.self_caches)
        assert (session.folded is None) == (arrangement == "many rows")


def test_the_modules_are_never_changed(random_model, sources):
    model = random_model(0)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    decoder = FastDecoder(model)
    greedy_decode(model, sources(0, 4), bos_id=BOS, eos_id=EOS, max_len=6, decoder=decoder)
    assert all("forward" not in m.__dict__ for m in model.modules())
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())


def test_a_decoder_belongs_to_one_transformer(random_model, sources):
    model, other = random_model(0), random_model(1)
    for decode in (greedy_decode, beam_search):
        with pytest.raises(ValueError, match="another model"):
            decode(model, sources(0, 2), bos_id=BOS, eos_id=EOS, max_len=4, decoder=FastDecoder(other))
    with pytest.raises(ValueError, match="Transformer"):
        FastDecoder(nn.Linear(2, 2))  # type: ignore[arg-type]
    assert decoder_for(nn.Linear(2, 2)) is None and isinstance(decoder_for(model), FastDecoder)


@pytest.mark.parametrize("seed", [0, 1])  # post-LN and pre-LN
def test_under_autocast_the_fast_step_equals_the_cached_model(random_model, distinct_norms, sources, seed):
    """Training validates under bf16 autocast, where a sub-layer's output is bf16 and the residual
    stream float32: the step adds them as the model does (a float32 sum), step by step."""
    model = distinct_norms(random_model(seed))
    src = sources(seed, 4)
    tokens = torch.randint(4, 16, (4, 6), generator=torch.Generator().manual_seed(seed))
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        session = FastDecoder(model).start(src)
        memory, cache = model.encode(src), model.new_cache()
        for t in range(tokens.size(1)):
            got = session.step(tokens[:, t : t + 1])
            want = model.decode(tokens[:, t : t + 1], memory, src, cache=cache)[:, -1]
            assert got.dtype == want.dtype
            torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)


def test_step_caches_are_read_by_sdpa():
    """A StepCache's keys are strided views that SDPA reads in place; the spelled-out attention
    (taken from single_query_rows rows) would copy them every step: every CPU kind's table keeps
    StepCaches below it, and a table that does not is refused."""
    import dataclasses

    from transformer.decoding import thresholds

    for table in (*thresholds.MEASURED.values(), thresholds.DEFAULT):
        assert table.flat_cache_max_rows < table.single_query_rows
    with pytest.raises(ValueError, match="flat_cache_max_rows"):
        dataclasses.replace(thresholds.DEFAULT, flat_cache_max_rows=thresholds.DEFAULT.single_query_rows)
