"""``precision="auto"``: the choice over a table of machines with injected probe timings, the probe
itself, and the attention rule that follows the same capability."""

from __future__ import annotations

import importlib

import pytest
import torch
import torch.nn.functional as F

from transformer import ModelConfig, Transformer
from transformer import hardware as H
from transformer.precision import (
    BF16_MIN_SPEEDUP,
    Probe,
    choose_precision,
    precision_for_model,
    probe_layer,
)


def cpu(arch: str, capability: str, flags: tuple[str, ...], mkldnn_bf16: bool) -> H.CpuInfo:
    return H.CpuInfo(arch=arch, model="test CPU", capability=capability, flags=flags,
                     mkldnn_bf16=mkldnn_bf16, quantized_engines=("x86", "qnnpack"))


# the module, not the function of the same name that transformer.model exports
attention_module = importlib.import_module("transformer.model.attention")

AVX2 = cpu("x86_64", "AVX2", ("avx2",), False)
SKYLAKE = cpu("x86_64", "AVX512", ("avx512f", "avx512bw"), True)  # bf16 emulated
ZEN4 = cpu("x86_64", "AVX512", ("avx512f", "avx512_bf16", "avx512_vnni"), True)
ARM_BF16 = cpu("aarch64", "SVE256", ("asimd", "bf16"), True)
H100 = H.CudaDevice(index=0, name="H100", capability=(9, 0), bf16=True, memory_gib=80)
V100 = H.CudaDevice(index=0, name="V100", capability=(7, 0), bf16=False, memory_gib=16)


def machine(cpu, *gpus) -> H.Machine:
    return H.Machine(cpu=cpu, cuda=tuple(gpus), torch=torch.__version__)


class FakeProbe:
    """A probe with set timings that counts its calls."""

    def __init__(self, fp32_ms: float, bf16_ms: float) -> None:
        self.result = Probe(fp32_ms=fp32_ms, bf16_ms=bf16_ms, tokens=256, backward=True)
        self.calls = 0

    def __call__(self) -> Probe:
        self.calls += 1
        return self.result


FAST = (10.0, 5.0)  # bf16 twice as fast
SLOW = (10.0, 84.0)  # bf16 8.4x slower (emulated)
EVEN = (10.0, 10.0 / (BF16_MIN_SPEEDUP - 0.02))  # faster, but not by the margin

# requested, device, machine, training, probe timings, chosen, probed, warned
CASES = [
    ("auto", "cpu", machine(AVX2), True, SLOW, "fp32", False, False),  # no probe without native
    ("auto", "cpu", machine(SKYLAKE), True, SLOW, "fp32", False, False),
    ("auto", "cpu", machine(ZEN4), True, FAST, "bf16", True, False),
    ("auto", "cpu", machine(ZEN4), False, SLOW, "fp32", True, False),  # e.g. decoding at d128
    ("auto", "cpu", machine(ZEN4), True, EVEN, "fp32", True, False),
    ("auto", "cpu", machine(ARM_BF16), True, FAST, "bf16", True, False),
    ("bf16", "cpu", machine(AVX2), True, SLOW, "bf16", True, True),  # kept, with the ratio
    ("bf16", "cpu", machine(ZEN4), False, FAST, "bf16", True, False),
    ("fp32", "cpu", machine(ZEN4), True, FAST, "fp32", False, False),
    ("int8", "cpu", machine(AVX2), False, SLOW, "int8", False, False),
    ("auto", "cuda", machine(AVX2, H100), True, SLOW, "bf16", False, False),
    ("auto", "cuda", machine(AVX2, V100), True, SLOW, "fp16", False, False),
    ("auto", "cuda", machine(AVX2, V100), False, SLOW, "fp32", False, False),
    ("auto", "cuda:0", machine(ZEN4, H100), False, SLOW, "bf16", False, False),
    ("fp16", "cuda", machine(ZEN4, H100), True, FAST, "fp16", False, False),
]


@pytest.mark.parametrize(("requested", "device", "box", "training", "timings", "chosen", "probed",
                          "warned"), CASES)
def test_choice_over_machines(requested, device, box, training, timings, chosen, probed, warned):
    probe = FakeProbe(*timings)
    choice = choose_precision(requested, device=device, machine=box, probe=probe,
                              training=training)
    assert choice.precision == chosen
    assert probe.calls == int(probed)
    assert (choice.probe is not None) == probed
    assert (choice.warning is not None) == warned
    assert choice.requested == requested and choice.reason
    if warned:
        assert "8.4x slower" in choice.warning and "\n" not in choice.warning
    record = choice.to_dict()
    assert record["precision"] == chosen and record["requested"] == requested


def test_the_reason_names_the_machine_and_the_probe():
    choice = choose_precision("auto", device="cpu", machine=machine(AVX2), probe=FakeProbe(*SLOW),
                              training=True)
    assert "no native bf16" in choice.describe() and "AVX2" in choice.describe()
    choice = choose_precision("auto", device="cpu", machine=machine(ZEN4), probe=FakeProbe(*FAST),
                              training=True)
    assert "2.00x" in choice.reason
    assert choice.to_dict()["probe"]["speedup"] == 2.0


def tiny() -> Transformer:
    return Transformer(ModelConfig(src_vocab_size=50, tgt_vocab_size=50, d_model=32, num_heads=4,
                                   num_encoder_layers=1, num_decoder_layers=1, d_ff=64,
                                   max_len=40))


@pytest.mark.real_probe
def test_probe_leaves_the_model_and_random_streams_alone():
    model = tiny()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    choice = precision_for_model("bf16", model=model, device="cpu", training=True)
    assert torch.equal(torch.rand(3), expected)  # the run's random stream is untouched
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    probe = choice.probe
    assert probe is not None and probe.fp32_ms > 0 and probe.bf16_ms > 0 and probe.backward
    assert 256 <= probe.tokens <= 4096


@pytest.mark.real_probe
def test_decoding_probe_times_decoding():
    choice = precision_for_model("bf16", model=tiny().eval(), device="cpu", training=False)
    assert choice.probe is not None and not choice.probe.backward
    assert choice.probe.tokens == 16 * 8  # sentences x steps


@pytest.mark.real_probe
def test_probe_layer_stops_repeating_past_its_time(monkeypatch):
    """With a clock where each pass takes a second, the probe takes one measured pair only."""
    ticks = iter(range(0, 10_000))
    layer = tiny().encoder.layers[0]
    probe = probe_layer(layer, d_model=32, d_ff=64, backward=False, max_len=40, repeats=5,
                        clock=lambda: float(next(ticks)))
    # begin, two warm-ups (2 reads each), one measured pair (2 each): no second pair
    assert next(ticks) == 1 + 4 + 1 + 4
    assert probe.fp32_ms == probe.bf16_ms == 1000.0


def test_a_resumed_auto_run_keeps_its_first_choice_on_the_same_kind_of_machine():
    first = precision_for_model("auto", model=tiny(), device="cpu", training=True,
                              machine=machine(ZEN4)).to_dict()  # the steadied probe: fp32
    assert first["machine"] == "test CPU, AVX512"
    previous = {**first, "precision": "bf16", "reason": "native bf16 and faster"}
    choice = precision_for_model("auto", model=tiny(), device="cpu", training=True,
                               machine=machine(ZEN4), previous=previous)
    assert choice.precision == "bf16" and "as chosen when the run started" in choice.reason
    # moved to a CPU without native bf16 (or from a GPU): chosen anew
    choice = precision_for_model("auto", model=tiny(), device="cpu", training=True,
                               machine=machine(AVX2), previous=previous)
    assert choice.precision == "fp32" and "no native bf16" in choice.reason
    fp16 = {"requested": "auto", "precision": "fp16", "reason": "V100", "machine": "V100"}
    choice = precision_for_model("auto", model=tiny(), device="cpu", training=True,
                               machine=machine(ZEN4), previous=fp16)
    assert choice.precision == "fp32" and choice.machine == "test CPU, AVX512"


@pytest.mark.parametrize("native", [True, False])
def test_16_bit_attention_follows_the_capability(monkeypatch, native):
    """bf16 attention on a CPU: spelled out where bf16 is native, SDPA's kernel elsewhere; both
    equal float32 attention within bf16's rounding."""
    monkeypatch.setattr(attention_module, "detect_cpu", lambda: ZEN4 if native else AVX2)
    calls = []
    sdpa = F.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls.append(1)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(attention_module.F, "scaled_dot_product_attention", counting)
    q, k, v = (torch.randn(2, 4, 6, 8) for _ in range(3))
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 4:] = False
    expected = sdpa(q, k, v, attn_mask=mask)
    calls.clear()
    out, _ = attention_module.attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask)
    assert len(calls) == (0 if native else 1)
    torch.testing.assert_close(out.float(), expected, atol=3e-2, rtol=3e-2)
    calls.clear()
    attention_module.attention(q, k, v, mask)  # float32 always takes SDPA
    assert len(calls) == 1


@pytest.mark.parametrize("native", [True, False])
def test_memory_estimate_follows_the_attention_rule(native):
    from transformer.memory.activations import ElementBytes, attention_bytes

    config = ModelConfig.tiny(100)
    by = ElementBytes.of("bf16", "cpu", native_bf16=native)
    assert by.spelled_out is native
    saved = attention_bytes(config, batch=4, lq=30, lk=30, causal=False, by=by)
    weights = 4 * config.num_heads * 30 * 30 * 2
    assert (saved >= 2 * weights) is native  # the spelled-out path keeps the weights
    assert not ElementBytes.of("bf16", "cuda", native_bf16=True).spelled_out
    assert not ElementBytes.of("fp32", "cpu", native_bf16=True).spelled_out

