"""The fast path's encoder pass equals ``model.encode``: every model variant, padded sources, products
packed for oneDNN or plain."""

from __future__ import annotations

import pytest
import torch

from transformer.decoding import FastDecoder
from transformer.decoding.fast_encoder import encoder_steps, fast_encode
from transformer.decoding.packing import int8_engine, packing_available


@pytest.mark.parametrize("pack", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])  # post-LN, pre-LN, learned positions, GELU
def test_fast_encode_equals_the_model(random_model, distinct_norms, sources, seed, pack, fast_kernels_from_one_row):
    if pack and not packing_available():
        pytest.skip("no oneDNN")
    model = distinct_norms(random_model(seed))
    for src in (sources(seed, 5), sources(seed, 3, min_len=8)):  # padded; no padding at all
        with torch.inference_mode():
            got = fast_encode(model, encoder_steps(model, pack=pack), src)
            torch.testing.assert_close(got, model.encode(src), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("precision", [
    "fp32", pytest.param("int8", marks=pytest.mark.skipif(
        int8_engine() is None, reason="no quantized engine (x86, fbgemm or qnnpack) for this CPU"))])
def test_a_fast_decoder_encodes_through_its_packed_encoder(random_model, sources, monkeypatch,
                                                           precision):
    """start() encodes with the packed encoder, made once with the decoder's steps (int8 too)."""
    import transformer.decoding.fast_decoder as fast_decoder

    calls = []
    monkeypatch.setattr(fast_decoder, "fast_encode", lambda *a: calls.append(1) or fast_encode(*a))
    model = random_model(0).eval()
    src = sources(0, 2)
    used = packing_available()
    decoder = FastDecoder(model, precision=precision)
    with torch.inference_mode():
        decoder.start(src)
        decoder.start(src)
    assert len(calls) == (2 if used else 0) and decoder.packs == int(used)
    calls.clear()
    with torch.inference_mode():
        FastDecoder(model, pack_weights=False).start(src)
    assert not calls
