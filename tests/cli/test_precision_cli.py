"""``--precision auto`` through the command line: what train records and says, the warning of an
explicit bf16 that is slow here, int8's device."""

from __future__ import annotations

import json

import pytest
import torch

from transformer import hardware as H
from transformer.cli import main


def avx2_machine() -> H.Machine:
    cpu = H.CpuInfo(arch="x86_64", model="test CPU", capability="AVX2", flags=("avx2",),
                    mkldnn_bf16=False, quantized_engines=("x86",))
    return H.Machine(cpu=cpu, cuda=(), torch=torch.__version__)


def test_train_records_its_choice_and_says_why_first(cli, number_files, tmp_path, capsys,
                                                      monkeypatch, caplog):
    """No --precision: on a CPU without native bf16 the run takes fp32 and its log says why before
    the model line; config.json keeps the choice."""
    monkeypatch.setattr(H, "detect", avx2_machine)
    flags = [f for f in cli.TINY if f not in ("--precision", "fp32")]
    run = tmp_path / "run"
    with caplog.at_level("INFO"):
        assert main(["train", *cli.data_flags(number_files), *flags, "--max-steps", "2",
                     "--eval-every", "2", "--out", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["precision"] == "fp32"
    lines = caplog.messages
    said = next(i for i, line in enumerate(lines) if "precision fp32 (asked: auto)" in line)
    assert "no native bf16" in lines[said] and "AVX2" in lines[said]
    assert said < next(i for i, line in enumerate(lines) if line.startswith("model: "))
    stored = json.loads((run / "config.json").read_text())["precision"]
    assert stored["requested"] == "auto" and stored["precision"] == "fp32"
    assert stored["reason"].startswith("this CPU has no native bf16")


def test_an_explicit_bf16_that_is_slow_here_warns_once(cli, run_dir, tmp_path, monkeypatch,
                                                       caplog):
    monkeypatch.setattr(H, "detect", avx2_machine)
    src = cli.write(tmp_path / "in.txt", cli.numbers(5))
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "-o",
                 str(tmp_path / "out.txt"), "--precision", "bf16"]) == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert "--precision bf16" in warnings[0] and "2.0x slower than fp32" in warnings[0]
    assert "no native bf16" in warnings[0]


def test_int8_decodes_on_the_cpu_and_refuses_cuda(monkeypatch, caplog):
    from transformer.cli import common
    from transformer.errors import InputError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(common, "device", torch.device)  # no CUDA here: resolve names only
    with caplog.at_level("INFO"):
        assert common.inference_device("auto", "int8") == torch.device("cpu")
    assert "int8 decodes on the CPU" in caplog.text
    with pytest.raises(InputError, match="--precision int8 decodes on the CPU only"):
        common.inference_device("cuda", "int8")
    assert common.inference_device("cuda:0", "fp32") == torch.device("cuda:0")
    assert common.inference_device("cpu", "int8") == torch.device("cpu")
