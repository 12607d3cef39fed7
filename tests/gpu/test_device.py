"""GPU check, device: ``resolve_device("auto")`` picks the GPU, ``hardware.detect()`` lists it with
its bf16 flag, and ``precision_for_model("auto")`` picks bf16 on a bf16 GPU (fp16 for training
without it, fp32 for decoding)."""

from __future__ import annotations

from dataclasses import asdict

import pytest
import torch

from transformer import ModelConfig, Transformer

pytestmark = pytest.mark.cuda


@pytest.mark.real_probe  # on a CPU with native bf16, auto's choice is the probe's
@pytest.mark.timeout(30)
def test_device_and_precision_choices(gpu, record):
    from transformer.hardware import detect
    from transformer.precision import precision_for_model
    from transformer.training.distributed import resolve_device

    record.tolerance = "exact choices"
    machine = detect()
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    auto = resolve_device("auto")
    record.figures["resolve_device_auto"] = str(auto)
    record.check("resolve_device('auto')", auto.type == expected, f"{auto} (expected {expected})")
    record.check("detect() lists every CUDA device",
                 len(machine.cuda) == torch.cuda.device_count(),
                 f"{len(machine.cuda)} listed, torch sees {torch.cuda.device_count()}")
    model = Transformer(ModelConfig.tiny(64, dropout=0.0)).to(gpu.device)
    if gpu.cuda:
        index = gpu.device.index or 0
        listed = next((d for d in machine.cuda if d.index == index), None)
        name = torch.cuda.get_device_name(index)
        major, minor = torch.cuda.get_device_capability(index)
        record.figures["gpu"] = None if listed is None else asdict(listed)
        record.figures["torch_says_bf16"] = torch.cuda.is_bf16_supported()
        assert record.check("detect() lists this GPU", listed is not None and listed.name == name,
                            f"{listed} vs {name}"), "\n".join(record.failures())
        record.check("bf16 flag = compute capability >= 8.0", listed.bf16 == (major >= 8),
                     f"bf16={listed.bf16}, sm {major}{minor}, torch.cuda.is_bf16_supported()="
                     f"{record.figures['torch_says_bf16']}")
        train_expected, infer_expected = ("bf16", "bf16") if listed.bf16 else ("fp16", "fp32")
        bf16 = "bf16" if listed.bf16 else "no bf16"
        record.summary = f"{auto} {name} (sm {major}{minor}, {bf16})"
    else:
        cpu = machine.cpu
        # without native bf16 auto is fp32; with it, the probe decides between the two
        train_expected = infer_expected = "fp32" if not cpu.native_bf16 else ("fp32", "bf16")
        record.summary = f"{auto} {cpu.model} ({cpu.capability}, native bf16 {cpu.native_bf16})"
    for training, want in ((True, train_expected), (False, infer_expected)):
        choice = precision_for_model("auto", model=model, device=gpu.device, training=training)
        key = "training" if training else "decoding"
        record.figures[f"auto_precision_{key}"] = choice.to_dict()
        ok = choice.precision in want if isinstance(want, tuple) else choice.precision == want
        record.check(f"precision_for_model('auto', training={training})", ok,
                     f"{choice.describe()} (expected {want})")
        record.summary += f"; auto {key} {choice.precision}"
    record.figures["machine_summary"] = machine.summary()
    assert not record.failures(), "\n".join(record.failures())
