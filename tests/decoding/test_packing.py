"""Pre-packed decoder weights: the same outputs as F.linear (up to float32 rounding), packing only
where it applies, the modules restored afterwards, and decoding results unchanged."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer.decoding import beam_search, greedy_decode
from transformer.decoding.packing import (
    PackedLinears,
    can_pack,
    decoder_packer,
    packed_decoder,
    packing_available,
)

PAD, BOS, EOS = 0, 2, 3

needs_onednn = pytest.mark.skipif(not packing_available(), reason="this PyTorch build has no oneDNN")


@needs_onednn
@pytest.mark.parametrize("shape", [(1, 24), (5, 24), (80, 24), (5, 1, 24), (2, 3, 24)])
def test_packed_linear_equals_f_linear(shape):
    torch.manual_seed(0)
    linears = [nn.Linear(24, 40), nn.Linear(24, 8, bias=False)]
    x = torch.randn(*shape)
    expected = [F.linear(x, linear.weight, linear.bias) for linear in linears]
    with torch.inference_mode(), PackedLinears(linears):
        for linear, want in zip(linears, expected, strict=True):
            got = linear(x)
            assert got.shape == want.shape
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_other_dtypes_take_f_linear():
    linear = nn.Linear(16, 32)
    with PackedLinears([linear]):
        linear.double()  # the packed copy is float32; a float64 input must not use it
        x = torch.randn(4, 16, dtype=torch.float64)
        assert torch.equal(linear(x), F.linear(x, linear.weight, linear.bias))


@needs_onednn
def test_module_restored_on_exit_and_on_error():
    linear = nn.Linear(8, 8)
    weight = linear.weight.detach().clone()
    with PackedLinears([linear]):
        assert "forward" in linear.__dict__
    assert "forward" not in linear.__dict__
    with pytest.raises(RuntimeError, match="boom"), PackedLinears([linear]):
        raise RuntimeError("boom")
    assert "forward" not in linear.__dict__
    assert torch.equal(linear.weight, weight)


@needs_onednn
def test_copies_are_kept_until_a_weight_changes():
    torch.manual_seed(0)
    linear = nn.Linear(8, 8)
    packer = PackedLinears([linear])
    x = torch.randn(3, 8)
    for _ in range(3):
        with packer:
            linear(x)
    assert packer.packs == 1
    with torch.no_grad():
        linear.weight.mul_(2.0)  # in place, as an optimizer step
    with torch.inference_mode(), packer:
        torch.testing.assert_close(linear(x), F.linear(x, linear.weight, linear.bias),
                                   rtol=1e-5, atol=1e-5)
    assert packer.packs == 2


@needs_onednn
def test_decoding_inside_an_entered_packer_packs_nothing_more(random_model, sources):
    model = random_model(0)
    with packed_decoder(model) as outer:
        assert outer is not None
        with packed_decoder(model) as inner:
            assert inner is None
        greedy_decode(model, sources(0, 4), bos_id=BOS, eos_id=EOS, max_len=6)
        assert outer.packs == 1
        assert all("forward" in m.__dict__ for m in outer.linears)  # still installed


@needs_onednn
def test_a_model_is_packed_once_across_decoding_calls_and_its_packer_goes_with_it(random_model, sources):
    import gc
    import weakref

    model = random_model(3)
    src = sources(3, 4)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=6)
    greedy_decode(model, src, **kw)
    packer = decoder_packer(model)
    assert packer is not None and packer.packs == 1
    beam_search(model, src, beam_size=3, **kw)
    greedy_decode(model, src, **kw)
    assert decoder_packer(model) is packer and packer.packs == 1
    gone = weakref.ref(packer)
    del model, packer
    gc.collect()
    assert gone() is None


def test_rejects_modules_that_are_not_linear():
    with pytest.raises(ValueError, match="Conv1d"):
        PackedLinears([nn.Conv1d(2, 2, 1)])


def test_no_packing_for_bf16_weights_or_under_autocast(random_model):
    model = random_model(0)
    assert can_pack(model) == packing_available()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not can_pack(model)
    assert not can_pack(model.to(torch.bfloat16))


@needs_onednn
def test_packs_every_per_step_linear_but_cross_attention_key_value(random_model):
    model = random_model(0)
    with packed_decoder(model) as packer:
        packed = {id(m) for m in packer.linears}
    for name, module in model.decoder.named_modules():
        if isinstance(module, nn.Linear):
            assert (id(module) in packed) == (not name.endswith(".kv_proj")), name
    assert id(model.output_projection) in packed
    assert all("forward" not in m.__dict__ for m in model.modules())


def test_packed_decoder_yields_none_when_it_does_not_apply(random_model):
    with packed_decoder(nn.Linear(2, 2)) as packer:
        assert packer is None
    with packed_decoder(random_model(1), enabled=False) as packer:
        assert packer is None


@needs_onednn
@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_decoding_with_packing_equals_without(copy_model, sources, monkeypatch, method):
    entered = []
    enter = PackedLinears.__enter__

    def counting_enter(self):
        entered.append(len(self.linears))
        return enter(self)

    monkeypatch.setattr(PackedLinears, "__enter__", counting_enter)
    src = sources(3, 24, min_len=2)

    def run(packed):
        if method == "greedy":
            return greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=20,
                                 pack_weights=packed)
        return beam_search(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=20, beam_size=3,
                           nbest=3, pack_weights=packed)

    plain = run(False)
    assert entered == []
    packed = run(True)
    assert entered, "packing should have been used"
    if method == "greedy":
        assert packed == plain
    else:
        assert [[ids for ids, _ in row] for row in packed] == [[ids for ids, _ in row] for row in plain]
        for row_a, row_b in zip(packed, plain, strict=True):
            torch.testing.assert_close([s for _, s in row_a], [s for _, s in row_b],
                                       rtol=1e-4, atol=1e-4)
