"""Pre-packed decoder weights: the same outputs as F.linear (up to float32 rounding), packing only
where it applies, once per FastDecoder (again only when a weight changes), and decoding results
unchanged."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer.decoding import FastDecoder, beam_search, greedy_decode
from transformer.decoding.packing import can_pack, int8_engine, packing_available, step_linear

PAD, BOS, EOS = 0, 2, 3

needs_onednn = pytest.mark.skipif(not packing_available(), reason="this PyTorch build has no oneDNN")
needs_int8 = pytest.mark.skipif(int8_engine() is None,
                                reason="no quantized engine (x86, fbgemm or qnnpack) for this CPU")


@needs_onednn
@pytest.mark.parametrize("shape", [(1, 24), (5, 24), (80, 24), (5, 1, 24), (2, 3, 24)])
def test_packed_linear_equals_f_linear(shape, fast_kernels_from_one_row):
    torch.manual_seed(0)
    linears = [nn.Linear(24, 40), nn.Linear(24, 8, bias=False)]
    x = torch.randn(*shape)
    with torch.inference_mode():
        for linear in linears:
            want = F.linear(x, linear.weight, linear.bias)
            for pack in (True, False):
                got = step_linear(linear, pack=pack)(x)
                assert got.shape == want.shape
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_packed_only_from_enough_rows(monkeypatch, use_thresholds):
    """oneDNN's packed product from pack_min_work / weight elements rows (for a big weight
    pack_min_work_big / its elements, at least pack_min_rows_big), a plain product below: the call
    that is faster at each size."""
    import transformer.decoding.packing as packing

    calls = []
    original = packing._packed_linear
    monkeypatch.setattr(packing, "_packed_linear", lambda *a: calls.append(1) or original(*a))
    use_thresholds(pack_min_work=8 * 24 * 20,  # 8 rows of the small weight
                   pack_min_work_big=3 * 24 * 40,  # 3 rows of the large one
                   pack_min_rows_big=2, big_weight=24 * 40)
    small, large, larger = nn.Linear(24, 20), nn.Linear(24, 40), nn.Linear(24, 400)
    with torch.inference_mode():
        for layer, rows, packed in ((small, 1, False), (small, 7, False), (small, 8, True),
                                    (large, 2, False), (large, 3, True),  # 3 rows of work
                                    (larger, 1, False), (larger, 2, True)):  # pack_min_rows_big
            calls.clear()
            x = torch.randn(rows, 1, 24)
            torch.testing.assert_close(step_linear(layer, pack=True)(x), layer(x))
            assert bool(calls) == packed, (layer, rows)


@pytest.mark.parametrize(("pack", "int8"), [
    (True, False), (False, False), pytest.param(False, True, marks=needs_int8)])
@pytest.mark.parametrize("shape", [(1, 1, 24), (3, 1, 24), (2, 24), (6, 1, 24)])
def test_few_rows_take_one_addmm_on_the_weight_transposed_once(shape, monkeypatch, use_thresholds,
                                                              pack, int8):
    """Below the packed product's rows, a float32 step multiplies a weight of big_weight elements
    or more by a row-major copy of its transpose (one addmm, or mm without a bias), a smaller one
    with F.linear (F.linear's result up to rounding); int8 takes no float32 copies."""
    import transformer.decoding.packing as packing

    calls = []
    original = packing._transposed_linear
    monkeypatch.setattr(packing, "_transposed_linear", lambda *a: calls.append(1) or original(*a))
    use_thresholds(big_weight=24 * 40, pack_min_rows_big=4, pack_min_work=1,  # packed from 4 rows
                   pack_min_work_big=1)
    torch.manual_seed(0)
    x = torch.randn(*shape)
    with torch.inference_mode():
        for linear in (nn.Linear(24, 40), nn.Linear(24, 48, bias=False), nn.Linear(24, 8)):
            transposed = linear.weight.numel() >= 24 * 40
            calls.clear()
            got = step_linear(linear, pack=pack, int8=int8)(x)
            if not (int8 and transposed):  # (a big weight's int8 product: test_int8.py)
                torch.testing.assert_close(got, linear(x), rtol=1e-5, atol=1e-5)
            few = x.numel() // 24 < 4  # int8: a big weight at every row count
            assert bool(calls) == (transposed and few and pack), (linear, pack, int8)


def test_other_modules_are_called_as_they_are():
    module = nn.Sequential(nn.Linear(4, 4))
    assert step_linear(module, pack=True) is module


def test_no_packing_for_bf16_weights_or_under_autocast(random_model):
    model = random_model(0)
    assert can_pack(model) == packing_available()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not can_pack(model)
    assert not can_pack(model.to(torch.bfloat16))


@needs_onednn
@pytest.mark.parametrize("products", ["packed", "transposed"])
def test_a_decoder_packs_once_across_decoding_calls_and_again_when_a_weight_changes(
        random_model, sources, products, request):
    if products == "packed":
        request.getfixturevalue("fast_kernels_from_one_row")
    else:  # the tiny batch takes the transposed copies, made as often
        request.getfixturevalue("use_thresholds")(big_weight=1, pack_min_rows_big=10**9)
    model = random_model(3)
    src = sources(3, 4)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=6)
    decoder = FastDecoder(model)
    first = greedy_decode(model, src, decoder=decoder, **kw)
    beam_search(model, src, beam_size=3, decoder=decoder, **kw)
    assert greedy_decode(model, src, decoder=decoder, **kw) == first
    assert decoder.packs == 1
    with torch.no_grad():  # in place, as an optimizer step: packed again, and used
        model.output_projection.weight.zero_()  # the packed (old) weights would not give EOS
        model.output_projection.bias[EOS] = 1.0
    assert greedy_decode(model, src, decoder=decoder, **kw) == [[]] * 4
    assert decoder.packs == 2


@needs_onednn
def test_packs_every_per_step_linear_but_cross_attention_key_value(random_model,
                                                                   fast_kernels_from_one_row):
    model = random_model(0)
    layers, output = FastDecoder(model).steps()
    packed = {"qkv", "self_out", "q", "cross_out", "ff1", "ff2"}
    for step in layers:
        for name in packed:
            assert getattr(step, name).func.__name__ == "_packed_linear", name
    assert output.func.__name__ == "_packed_linear"
    unpacked, _ = FastDecoder(model, pack_weights=False).steps()
    assert all(getattr(unpacked[0], name).func is F.linear for name in packed)


def test_float64_and_autocast_decode_unpacked(random_model, sources):
    model = random_model(1)
    decoder = FastDecoder(model.double())
    greedy_decode(model, sources(1, 3), bos_id=BOS, eos_id=EOS, max_len=4, decoder=decoder)
    assert decoder.packs == 0
    model.float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        greedy_decode(model, sources(1, 3), bos_id=BOS, eos_id=EOS, max_len=4, decoder=decoder)
    assert decoder.packs == 0


@needs_onednn
@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_decoding_with_packing_equals_without(copy_model, sources, method, fast_kernels_from_one_row):
    src = sources(3, 24, min_len=2)
    decoders = {packed: FastDecoder(copy_model, pack_weights=packed) for packed in (True, False)}

    def run(packed):
        if method == "greedy":
            return greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=20,
                                 decoder=decoders[packed])
        return beam_search(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=20, beam_size=3,
                           nbest=3, decoder=decoders[packed])

    plain = run(False)
    packed = run(True)
    assert (decoders[True].packs, decoders[False].packs) == (1, 0), "packing should have been used"
    if method == "greedy":
        assert packed == plain
    else:
        assert [[ids for ids, _ in row] for row in packed] == [[ids for ids, _ in row] for row in plain]
        for row_a, row_b in zip(packed, plain, strict=True):
            torch.testing.assert_close([s for _, s in row_a], [s for _, s in row_b],
                                       rtol=1e-4, atol=1e-4)
