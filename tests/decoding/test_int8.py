"""int8 decoding: the decoder's linear layers and output projection with int8 weights made once.

Tolerances, stated: an int8 linear layer is within 2% of float32's largest output (per-row int8
weights, 7-bit dynamic activations), and on a layer whose rows' maxima span three decades within
the input's rounding of a per-row quantized product computed in float32 (so one scale per matrix
fails); with such an output projection every word's logit stays within 10% of its range (3%
measured on Zen 4, AVX-512 and forced AVX2; 100% with one scale per matrix); on a copy-trained tiny model, an int8 step gives float32's
best token a log-probability within 0.1 of float32's (every token within 1.0), and greedy and
beam outputs equal float32's for at least 80% of the sentences (a model trained for 50 steps has
near-ties).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from transformer.decoding import FastDecoder, beam_search, greedy_decode
from transformer.decoding.packing import int8_engine, step_linear

pytestmark = [pytest.mark.skipif(int8_engine() is None, reason="no quantized engine for this CPU"),
              pytest.mark.usefixtures("fast_kernels_from_one_row")]  # int8 at every size
BOS, EOS = 2, 3


@pytest.mark.parametrize("rows", [1, 16])
def test_int8_linear_is_close_to_float32(rows):
    torch.manual_seed(0)
    layer = nn.Linear(64, 200)
    x = torch.randn(rows, 64)
    exact = layer(x)
    got = step_linear(layer, pack=False, int8=True)(x)
    assert got.shape == exact.shape
    assert (got - exact).abs().max() <= 0.02 * exact.abs().max()
    assert not torch.equal(got, exact)  # it really is the quantized kernel


def rows_of_different_sizes(layer: nn.Linear, seed: int) -> nn.Linear:
    """``layer`` with its output rows scaled by factors from 1 to 1/1000 (bias too), so a scale
    for the whole matrix would round the small rows to zero."""
    g = torch.Generator().manual_seed(seed)
    factors = torch.logspace(0, -3, layer.out_features)[torch.randperm(layer.out_features, generator=g)]
    with torch.no_grad():
        layer.weight.mul_(factors[:, None])
        if layer.bias is not None:
            layer.bias.mul_(factors)
    return layer


def per_row_reference(layer: nn.Linear, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What an int8 product with per-row symmetric weights gives, in float32: ``x`` times the
    weight rounded to 255 levels of its own row's largest magnitude, plus the bias; and the most
    the 7-bit dynamic quantization of ``x`` (one affine scale over the whole input, rounding by
    at most half a step) can move each output from it: half a step times the row's sum of
    magnitudes."""
    w = layer.weight.detach()
    scale = w.abs().amax(dim=1, keepdim=True) / 127  # (out, 1)
    rounded = (w / scale).round().clamp(-128, 127) * scale
    reference = x @ rounded.T + (layer.bias.detach() if layer.bias is not None else 0)
    step = (max(x.max().item(), 0.0) - min(x.min().item(), 0.0)) / 127
    return reference, step / 2 * rounded.abs().sum(dim=1)


@pytest.mark.parametrize("rows", [1, 16])
def test_int8_rows_have_their_own_scales(rows):
    """On a layer whose rows' maxima span three decades, each output is within the rounding of
    the input of a per-row quantized product (computed here in float32): a scale for the whole
    matrix puts the small rows' outputs 15x or more outside the bound."""
    torch.manual_seed(0)
    layer = rows_of_different_sizes(nn.Linear(64, 48), seed=1)
    x = torch.randn(rows, 64)
    got = step_linear(layer, pack=False, int8=True)(x)
    reference, bound = per_row_reference(layer, x)
    assert ((got - reference).abs() <= bound + 1e-6).all(), ((got - reference).abs() / bound).max()


def paired_steps(model, src, *, steps):
    """Float32's and int8's logits (R, V) at each of ``steps`` decoding steps of ``src``, both fed
    float32's best tokens, in inference mode."""
    with torch.inference_mode():
        full = FastDecoder(model).start(src)
        int8 = FastDecoder(model, precision="int8").start(src)
        tokens = torch.full((src.size(0), 1), BOS)
        for _ in range(steps):
            a = full.step(tokens)
            yield a, int8.step(tokens)
            tokens = a.argmax(-1, keepdim=True)


def test_int8_steps_stay_close_to_float32(copy_model, sources):
    for full, int8 in paired_steps(copy_model, sources(0, 6, min_len=2), steps=6):
        a, b = full.log_softmax(-1), int8.log_softmax(-1)  # (R, V)
        best = a.argmax(-1, keepdim=True)
        assert (a.gather(-1, best) - b.gather(-1, best)).abs().max() < 0.1
        assert (a - b).abs().max() < 1.0
        assert (b.argmax(-1, keepdim=True) == best).float().mean() >= 0.8


def test_int8_logits_follow_float32_on_every_row_of_the_output_projection(copy_model, sources):
    """The output projection's rows scaled from 1 to 1/1000: every word's logit stays within 10%
    of how far float32's moves it from its bias, small rows included (one scale for the whole
    matrix rounds the small rows' weights to zero: their logits become the bias)."""
    model = copy.deepcopy(copy_model)
    rows_of_different_sizes(model.output_projection, seed=2)
    bias = model.output_projection.bias.detach()
    for a, b in paired_steps(model, sources(0, 6, min_len=2), steps=4):  # (R, V) each
        reach = (a - bias).abs().amax(dim=0)  # (V,) how far each word's logit moves
        worst = ((b - a).abs().amax(dim=0) / reach).max()
        assert worst <= 0.1, f"an int8 logit off by {worst:.0%} of its word's range"


def test_int8_outputs_mostly_equal_float32(copy_model, sources):
    src = sources(7, 40, min_len=2)
    for decode in (greedy_decode, beam_search):
        full = decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=12)
        int8 = decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=12, precision="int8")
        same = sum(a == b for a, b in zip(full, int8, strict=True))
        assert same >= 0.8 * len(src), f"{decode.__name__}: {same} of {len(src)} equal"


def test_int8_weights_are_made_once(copy_model, sources, monkeypatch):
    import transformer.decoding.packing as packing

    calls = []
    original = packing.int8_linear_weight
    monkeypatch.setattr(packing, "int8_linear_weight", lambda m: calls.append(m) or original(m))
    decoder = FastDecoder(copy_model, precision="int8")
    for seed in range(3):
        greedy_decode(copy_model, sources(seed, 4), bos_id=BOS, eos_id=EOS, max_len=6,
                      decoder=decoder, precision="int8")
    per_model = 6 * copy_model.config.num_decoder_layers + 1
    assert len(calls) == per_model


def test_int8_is_refused_where_it_cannot_run(copy_model, sources):
    src = sources(0, 2)
    with pytest.raises(ValueError, match="key/value cache"):
        greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=4, use_cache=False,
                      precision="int8")
    with pytest.raises(ValueError, match="precision"):
        greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=4, precision="int4")
    with pytest.raises(ValueError, match="built for 'fp32'"):
        greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=4,
                      decoder=FastDecoder(copy_model), precision="int8")
    with pytest.raises(ValueError, match="float32"):
        FastDecoder(copy.deepcopy(copy_model).to(torch.bfloat16), precision="int8")


def test_int8_where_it_pays_plain_float32_elsewhere(monkeypatch, use_thresholds):
    """By rows: a small weight takes int8 from int8_min_work / its elements rows (float32 below,
    equal to F.linear up to rounding), a weight of big_weight elements or more at every row count."""
    import transformer.decoding.packing as packing

    calls = []
    original = packing._int8_linear
    monkeypatch.setattr(packing, "_int8_linear", lambda *a: calls.append(1) or original(*a))
    use_thresholds(int8_min_work=4 * 64 * 100 - 10, big_weight=64 * 200)  # 4 rows of the small one
    torch.manual_seed(0)
    small, large = nn.Linear(64, 100), nn.Linear(64, 200)
    with torch.inference_mode():
        for layer, rows, int8 in ((small, 1, False), (small, 3, False), (small, 4, True),
                                  (large, 1, True), (large, 8, True)):
            calls.clear()
            x = torch.randn(rows, 1, 64)
            got = step_linear(layer, pack=False, int8=True)(x)
            assert bool(calls) == int8, (layer, rows)
            if not int8:
                torch.testing.assert_close(got, layer(x), rtol=1e-5, atol=1e-5)


@pytest.fixture
def arm_engine(monkeypatch):
    """This machine described as an ARM one (NEON, qnnpack only), as int8 decoding sees it; the
    quantized engine in force is put back after."""
    from transformer import hardware

    if "qnnpack" not in torch.backends.quantized.supported_engines:
        pytest.skip("this PyTorch build has no qnnpack")
    arm = hardware.CpuInfo(arch="aarch64", model="test ARM", capability="NEON", flags=("asimd",),
                           mkldnn_bf16=False, quantized_engines=("qnnpack",))
    monkeypatch.setattr(hardware, "detect_cpu", lambda: arm)
    monkeypatch.setattr(torch.backends.quantized, "engine", torch.backends.quantized.engine)
    assert int8_engine() == "qnnpack"


@pytest.mark.usefixtures("arm_engine")
@pytest.mark.parametrize("rows", [1, 16])
def test_int8_on_qnnpack_is_close_to_float32(rows):
    """The ARM path: qnnpack takes the same per-row symmetric int8 weights, with 8-bit
    activations (it ignores reduce_range); the same tolerance as fbgemm's."""
    from transformer.decoding.packing import int8_linear_weight

    torch.manual_seed(0)
    layer = nn.Linear(64, 200)
    weight = int8_linear_weight(layer)
    assert (weight.engine, weight.reduce_range) == ("qnnpack", False)
    x = torch.randn(rows, 64)
    exact = layer(x)
    got = step_linear(layer, pack=False, int8=True)(x)
    assert (got - exact).abs().max() <= 0.02 * exact.abs().max()
    assert not torch.equal(got, exact)


@pytest.mark.usefixtures("arm_engine")
def test_int8_decoding_on_qnnpack_mostly_equals_float32(copy_model, sources):
    before = torch.backends.quantized.engine
    src = sources(7, 40, min_len=2)
    decoder = FastDecoder(copy_model, precision="int8")
    for decode in (greedy_decode, beam_search):
        full = decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=12)
        int8 = decode(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=12, precision="int8",
                      decoder=decoder)
        same = sum(a == b for a, b in zip(full, int8, strict=True))
        assert same >= 0.8 * len(src), f"{decode.__name__}: {same} of {len(src)} equal"
    assert torch.backends.quantized.engine == before  # packed for qnnpack, the setting left alone


@pytest.mark.parametrize("fake_arm", [False, True])
def test_packing_leaves_the_engine_as_it_was_and_computes_the_same_under_any(
        fake_arm, monkeypatch, request):
    """The engine is set only while a weight is packed; the packed weight carries its engine's
    kernel, so the product is the same whatever engine is in force when it runs."""
    from transformer.decoding.packing import int8_linear_weight

    if fake_arm:
        request.getfixturevalue("arm_engine")
    monkeypatch.setattr(torch.backends.quantized, "engine", torch.backends.quantized.engine)
    others = [e for e in torch.backends.quantized.supported_engines if e != int8_engine()]
    if not others:
        pytest.skip("this PyTorch build has a single quantized engine")
    torch.backends.quantized.engine = others[0]
    torch.manual_seed(0)
    layer = nn.Linear(64, 200)
    weight = int8_linear_weight(layer)
    assert weight.engine == int8_engine()
    assert torch.backends.quantized.engine == others[0]
    x = torch.randn(5, 64)
    outside = torch.ops.quantized.linear_dynamic(x, weight.packed, weight.reduce_range)
    torch.backends.quantized.engine = weight.engine
    inside = torch.ops.quantized.linear_dynamic(x, weight.packed, weight.reduce_range)
    assert torch.equal(outside, inside)
