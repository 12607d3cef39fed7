"""The machine's description and the choices read from it, over a table of machines this one is not."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from transformer.hardware import CpuInfo, CudaDevice, Machine, cpu_flags, cpu_model, detect

ALL_ENGINES = ("qnnpack", "onednn", "x86", "fbgemm")


def cpu(arch="x86_64", capability="AVX2", flags=("avx2",), mkldnn_bf16=False,
        engines=ALL_ENGINES) -> CpuInfo:
    return CpuInfo(arch=arch, model="test CPU", capability=capability, flags=tuple(flags),
                   mkldnn_bf16=mkldnn_bf16, quantized_engines=tuple(engines))


# name, cpu, native bf16, VNNI, int8 engine
MACHINES = [
    ("AVX2 (EPYC without AVX-512)", cpu(), False, False, "x86"),
    ("AVX2 with AVX-VNNI (Alder Lake)", cpu(flags=("avx2", "avx_vnni")), False, True, "x86"),
    # oneDNN runs bf16 on AVX-512 by emulation: supported, not native
    ("AVX-512 without bf16 (Skylake-X)",
     cpu(capability="AVX512", flags=("avx2", "avx512f", "avx512bw"), mkldnn_bf16=True),
     False, False, "x86"),
    ("AVX-512 bf16 and VNNI (Zen 4)",
     cpu(capability="AVX512", flags=("avx2", "avx512f", "avx512bw", "avx512_bf16", "avx512_vnni"),
         mkldnn_bf16=True), True, True, "x86"),
    ("AMX (Sapphire Rapids)",
     cpu(capability="AVX512", flags=("avx512f", "avx512bw", "amx_bf16", "amx_int8", "amx_tile"),
         mkldnn_bf16=True), True, True, "x86"),
    # ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 on a Zen 4: the flags stay, PyTorch does not
    ("Zen 4 forced down to AVX2",
     cpu(capability="AVX2", flags=("avx2", "avx512f", "avx512_bf16", "avx512_vnni")),
     False, False, "x86"),
    # ATen held to AVX2 while oneDNN still offers bf16: ATen's own bf16 kernels (softmax, norms)
    # would run emulated, so not native either
    ("Zen 4 with only ATen forced down",
     cpu(capability="AVX2", flags=("avx2", "avx512f", "avx512_bf16", "avx512_vnni"),
         mkldnn_bf16=True), False, False, "x86"),
    ("an x86 build with fbgemm only", cpu(engines=("fbgemm",)), False, False, "fbgemm"),
    ("ARM with bf16 and i8mm (Graviton 3)",
     cpu(arch="aarch64", capability="SVE256", flags=("asimd", "sve", "bf16", "i8mm"),
         mkldnn_bf16=True, engines=("qnnpack", "none")), True, True, "qnnpack"),
    ("ARM without bf16 (Graviton 2)",
     cpu(arch="aarch64", capability="DEFAULT", flags=("asimd",), engines=("qnnpack",)),
     False, False, "qnnpack"),
    ("macOS ARM", cpu(arch="arm64", capability="DEFAULT", flags=(), engines=("qnnpack",)),
     False, False, "qnnpack"),
    ("ARM build without qnnpack", cpu(arch="aarch64", flags=(), engines=()), False, False, None),
    ("another architecture", cpu(arch="riscv64", flags=()), False, False, None),
]


@pytest.mark.parametrize(("name", "info", "bf16", "vnni", "engine"), MACHINES,
                         ids=[m[0] for m in MACHINES])
def test_capabilities_over_machines(name, info, bf16, vnni, engine):
    assert info.native_bf16 is bf16
    assert info.vnni is vnni
    assert info.int8_engine == engine


X86_CPUINFO = """processor\t: 0
model name\t: AMD EPYC 9R14
flags\t\t: fpu sse avx avx2 fma avx512f avx512bw avx512_bf16 avx512_vnni
processor\t: 1
model name\t: AMD EPYC 9R14
flags\t\t: fpu sse avx avx2 fma avx512f avx512bw avx512_bf16 avx512_vnni
"""
ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes sve bf16 i8mm
CPU implementer\t: 0x41
"""


def test_flags_and_model_from_cpuinfo():
    assert cpu_flags(X86_CPUINFO) == ("avx2", "avx512f", "avx512bw", "avx512_bf16", "avx512_vnni")
    assert cpu_model(X86_CPUINFO) == "AMD EPYC 9R14"
    assert cpu_flags(ARM_CPUINFO) == ("bf16", "i8mm", "asimd", "sve")
    assert cpu_model(ARM_CPUINFO)  # falls back to the platform's name
    assert cpu_flags("") == ()


def test_detect_reads_what_pytorch_uses():
    """Not an ISA check: whatever this machine is, the description agrees with PyTorch."""
    machine = detect()
    assert machine.cpu.capability == torch.backends.cpu.get_cpu_capability()
    assert machine.cpu.quantized_engines == tuple(torch.backends.quantized.supported_engines)
    assert machine.cpu.mkldnn_bf16 == bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    assert len(machine.cuda) == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    described = machine.to_dict()
    assert described["cpu"]["native_bf16"] == machine.cpu.native_bf16
    assert described["cpu"]["int8_engine"] == machine.cpu.int8_engine
    assert machine.cpu.capability in machine.summary()


def test_summary_names_gpus():
    gpu = CudaDevice(index=0, name="NVIDIA H100", capability=(9, 0), bf16=True, memory_gib=79.6)
    line = Machine(cpu=MACHINES[3][1], cuda=(gpu,), torch="2.13").summary()
    assert "AVX512, native bf16" in line and "cuda:0 NVIDIA H100 (sm 90, bf16, 80 GiB)" in line


# --- read without PyTorch: the cache of its answers, its thread count, whether CUDA can be --------

def _fresh(code: str, **env: str) -> list[str]:
    """``code`` run in a fresh interpreter on this checkout (PyTorch not yet imported): its
    stdout's lines."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import transformer

    src = str(Path(transformer.__file__).resolve().parents[1])
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": src, **env})
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.splitlines()


ASK = ("import dataclasses, json, sys\nfrom transformer.hardware import detect_cpu\n"
       "cpu = detect_cpu()\nprint(json.dumps(dataclasses.asdict(cpu)), 'torch' in sys.modules)\n")


def test_the_cpu_read_from_the_cache_is_pytorchs_and_keyed_by_its_environment(tmp_path):
    """The first process asks PyTorch and caches its answer; the next reads it without PyTorch;
    a change of what PyTorch's view depends on (ATEN_CPU_CAPABILITY) is not served the old one."""
    first, first_torch = _fresh(ASK, XDG_CACHE_HOME=str(tmp_path))[0].rsplit(" ", 1)
    second, second_torch = _fresh(ASK, XDG_CACHE_HOME=str(tmp_path))[0].rsplit(" ", 1)
    assert (first_torch, second_torch) == ("True", "False") and second == first
    assert json.loads(first) == json.loads(json.dumps(dataclasses.asdict(detect_cpu_now())))
    lowered, lowered_torch = _fresh(ASK, XDG_CACHE_HOME=str(tmp_path),
                                    ATEN_CPU_CAPABILITY="default")[0].rsplit(" ", 1)
    assert lowered_torch == "True" and json.loads(lowered)["capability"] == "DEFAULT"


def detect_cpu_now() -> CpuInfo:
    from transformer.hardware import _cpu_from_torch

    return _cpu_from_torch()


THREADS = ("import sys\nfrom transformer.hardware import cuda_surely_absent, intra_op_threads\n"
           "ours, absent = intra_op_threads(), cuda_surely_absent()\nimport torch\n"
           "print(ours, torch.get_num_threads(), absent, torch.cuda.is_available())\n")


@pytest.mark.parametrize("env", [{}, {"OMP_NUM_THREADS": "1"}, {"OMP_NUM_THREADS": "64"},
                                 {"MKL_NUM_THREADS": "3", "MKL_DYNAMIC": "FALSE"}],
                         ids=["default", "omp-1", "omp-above-the-cores", "mkl-not-dynamic"])
def test_the_thread_count_read_without_pytorch_is_the_one_it_takes(env):
    """(Checked on this machine's CPU and PyTorch build, an x86 build with MKL and OpenMP here,
    under whatever CPU affinity the suite runs with.)"""
    ours, theirs, absent, available = _fresh(THREADS, **env)[0].split()
    assert ours == theirs
    assert not (absent == "True" and available == "True")  # "surely absent" is never wrong


def test_threads_set_before_pytorch_is_imported_are_the_ones_it_takes():
    code = ("from transformer.hardware import intra_op_threads, set_intra_op_threads\n"
            "set_intra_op_threads(3)\nours = intra_op_threads()\nimport torch\n"
            "print(ours, torch.get_num_threads())\n")
    assert _fresh(code)[0].split() == ["3", "3"]
