"""What this machine can do, asked in one place: the CPU's instruction set as PyTorch uses it, native
bf16, the int8 engine, CUDA devices.

Every choice made by measurement (precision, the attention rule, decoding kernels, int8) reads it
from here, so a threshold measured on one kind of CPU is never applied blindly to another
(STYLE.md, habit 11). The choices themselves are pure functions of a :class:`Machine`, so tests
run them over a table of machines this one is not.

PyTorch's own view wins over the CPU's flags where they differ: ``ATEN_CPU_CAPABILITY=avx2`` and
``ONEDNN_MAX_CPU_ISA=AVX2`` make an AVX-512 machine behave, and be described, as an AVX2 one.
"""

from __future__ import annotations

import dataclasses
import functools
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# /proc/cpuinfo flags that decide something here (x86 names; ARM's "bf16" and "i8mm" likewise)
FLAGS_OF_INTEREST = ("avx2", "avx512f", "avx512bw", "avx512_bf16", "avx512_vnni", "avx_vnni",
                     "amx_bf16", "amx_int8", "amx_tile", "bf16", "i8mm", "asimd", "sve")
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
X86_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@dataclass(frozen=True)
class CpuInfo:
    """The CPU as PyTorch sees it."""

    arch: str  # platform.machine(): x86_64, aarch64, arm64
    model: str  # the model name, e.g. "AMD EPYC 9R14"
    capability: str  # torch.backends.cpu.get_cpu_capability(): AVX512, AVX2, DEFAULT, SVE256, ...
    flags: tuple[str, ...]  # the FLAGS_OF_INTEREST this CPU reports
    mkldnn_bf16: bool  # oneDNN runs bf16 here (natively or emulated; respects ONEDNN_MAX_CPU_ISA)
    quantized_engines: tuple[str, ...]  # torch.backends.quantized.supported_engines

    @property
    def is_x86(self) -> bool:
        return self.arch.lower() in ("x86_64", "amd64", "i686", "x86")

    @property
    def is_arm(self) -> bool:
        return self.arch.lower() in ("aarch64", "arm64") or self.arch.lower().startswith("arm")

    @property
    def native_bf16(self) -> bool:
        """bf16 dot products in hardware, and PyTorch's kernels allowed to use them: AVX512-BF16
        or AMX on x86 (with ATen at AVX-512), the BF16 extension on ARM. Without it bf16 runs
        emulated, several times slower than float32."""
        if not self.mkldnn_bf16:
            return False
        if self.is_x86:
            return (self.capability.upper().startswith("AVX512")
                    and any(f in self.flags for f in X86_BF16_FLAGS))
        return self.is_arm and "bf16" in self.flags

    @property
    def vnni(self) -> bool:
        """int8 dot products that accumulate without saturating (x86 VNNI/AMX; ARM's i8mm)."""
        if self.is_arm:
            return "i8mm" in self.flags
        avx512 = self.capability.upper().startswith("AVX512")
        return any(f in self.flags and (avx512 or f != "avx512_vnni") for f in VNNI_FLAGS)

    @property
    def int8_engine(self) -> str | None:
        """PyTorch's quantized engine for int8 decoding: x86 (else fbgemm) on x86, qnnpack on
        ARM; None when this build has none for the platform."""
        preference = ("x86", "fbgemm") if self.is_x86 else ("qnnpack",) if self.is_arm else ()
        return next((e for e in preference if e in self.quantized_engines), None)


@dataclass(frozen=True)
class CudaDevice:
    index: int
    name: str
    capability: tuple[int, int]  # compute capability (major, minor)
    bf16: bool  # native bf16 (compute capability 8.0 and later)
    memory_gib: float


@dataclass(frozen=True)
class Machine:
    cpu: CpuInfo
    cuda: tuple[CudaDevice, ...]
    torch: str

    def to_dict(self) -> dict[str, Any]:
        cpu = dataclasses.asdict(self.cpu)
        cpu.update(native_bf16=self.cpu.native_bf16, vnni=self.cpu.vnni,
                   int8_engine=self.cpu.int8_engine)
        return {"cpu": cpu, "cuda": [dataclasses.asdict(d) for d in self.cuda], "torch": self.torch}

    def summary(self) -> str:
        """One line: the CPU kind and what it offers, and any GPUs."""
        cpu = self.cpu
        line = (f"{cpu.model} ({cpu.arch}, {cpu.capability}, "
                f"{'native bf16' if cpu.native_bf16 else 'no native bf16'}, "
                f"{'VNNI' if cpu.vnni else 'no VNNI'}, int8 engine {cpu.int8_engine or 'none'})")
        for d in self.cuda:
            line += (f"; cuda:{d.index} {d.name} (sm {d.capability[0]}{d.capability[1]}, "
                     f"{'bf16' if d.bf16 else 'no bf16'}, {d.memory_gib:.0f} GiB)")
        return line


def cpu_flags(cpuinfo: str | None = None) -> tuple[str, ...]:
    """The FLAGS_OF_INTEREST in ``cpuinfo`` (the text of /proc/cpuinfo; read when None)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return ()
    found: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):  # x86, ARM
            found.update(value.split())
    return tuple(f for f in FLAGS_OF_INTEREST if f in found)


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name (e.g. "AMD EPYC 9R14"), or the platform's processor string."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("model name", "cpu model", "hardware") and value.strip():
            return value.strip()
    return platform.processor() or platform.machine()


@functools.cache
def detect_cpu() -> CpuInfo:
    """This machine's CPU as PyTorch sees it (asked once per process; touches no GPU)."""
    import torch

    try:
        mkldnn_bf16 = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        mkldnn_bf16 = False
    cpu = CpuInfo(arch=platform.machine(), model=cpu_model(),
                  capability=torch.backends.cpu.get_cpu_capability(), flags=cpu_flags(),
                  mkldnn_bf16=mkldnn_bf16,
                  quantized_engines=tuple(torch.backends.quantized.supported_engines))
    return cpu


@functools.cache
def detect() -> Machine:
    """This machine: its CPU and CUDA devices (asked once per process)."""
    import torch

    devices = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            devices.append(CudaDevice(index=i, name=p.name, capability=(p.major, p.minor),
                                      bf16=p.major >= 8, memory_gib=p.total_memory / 2**30))
    return Machine(cpu=detect_cpu(), cuda=tuple(devices), torch=torch.__version__)


def resolve_device(device: str = "auto", *, local_rank: int = 0) -> Any:
    """A device name as a ``torch.device``: ``"auto"`` -> the rank's GPU when CUDA is available,
    else the CPU; other names pass through (``cuda`` -> ``cuda:local_rank``, made current).
    ValueError for an unknown name or a CUDA device on a machine without one."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ValueError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} asked for, but CUDA is not available")
        if dev.index is None:
            dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
    return dev
