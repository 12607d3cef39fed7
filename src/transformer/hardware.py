"""What this machine can do, asked in one place: the CPU's instruction set as PyTorch uses it, native
bf16, the int8 engine, CUDA devices.

Every choice made by measurement (precision, the attention rule, decoding kernels, int8) reads it
from here, so a threshold measured on one kind of CPU is never applied blindly to another
(STYLE.md, habit 11). The choices themselves are pure functions of a :class:`Machine`, so tests
run them over a table of machines this one is not.

PyTorch's own view wins over the CPU's flags where they differ: ``ATEN_CPU_CAPABILITY=avx2`` and
``ONEDNN_MAX_CPU_ISA=AVX2`` make an AVX-512 machine behave, and be described, as an AVX2 one.

A process that needs no tensor (``transformer version``, decoding on CTranslate2) reads these
facts without importing PyTorch: the first process to ask imports it and writes its answer to the
user's cache (``$XDG_CACHE_HOME/transformer/machine/``), keyed by everything the answer depends on
(PyTorch's build, the CPU's model and flags, the environment variables above), and later ones read
it back. Whether CUDA can be present, PyTorch's version and its thread count are read without it
(:func:`torch_build`, :func:`cuda_surely_absent`, :func:`intra_op_threads`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import platform
import sys
import tempfile
from dataclasses import dataclass
from importlib.util import find_spec, module_from_spec, spec_from_file_location
from pathlib import Path
from typing import Any

# /proc/cpuinfo flags that decide something here (x86 names; ARM's "bf16" and "i8mm" likewise)
FLAGS_OF_INTEREST = ("avx2", "avx512f", "avx512bw", "avx512_bf16", "avx512_vnni", "avx_vnni",
                     "amx_bf16", "amx_int8", "amx_tile", "bf16", "i8mm", "asimd", "sve")
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
# what PyTorch's view of the CPU depends on besides the CPU and PyTorch's build
CPU_ENV = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
CACHE_FORMAT = 1  # of the cached facts' files
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
    """This machine's CPU as PyTorch sees it (asked once per process; touches no GPU). Without
    PyTorch imported, read from the user's cache when an earlier process wrote it for this
    PyTorch build, CPU and environment; else PyTorch is imported, asked, and the answer cached."""
    if "torch" in sys.modules:
        return _cpu_from_torch()
    key = _cpu_key()
    cached = _read_cached(key)
    if cached is not None:
        try:
            return CpuInfo(**{k: tuple(v) if isinstance(v, list) else v for k, v in cached.items()})
        except TypeError:  # another version's fields
            pass
    cpu = _cpu_from_torch()
    _write_cached(key, dataclasses.asdict(cpu))
    return cpu


def _cpu_from_torch() -> CpuInfo:
    import torch

    try:
        mkldnn_bf16 = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        mkldnn_bf16 = False
    return CpuInfo(arch=platform.machine(), model=cpu_model(),
                   capability=torch.backends.cpu.get_cpu_capability(), flags=cpu_flags(),
                   mkldnn_bf16=mkldnn_bf16,
                   quantized_engines=tuple(torch.backends.quantized.supported_engines))


@functools.cache
def torch_build() -> dict[str, str | None] | None:
    """PyTorch's build as its own ``torch/version.py`` states it, read without importing PyTorch:
    ``{"version", "cuda", "hip", "file"}`` (cuda, hip: None in a build without them; file: the
    version file's path, size and modification time, which a reinstall changes); None when PyTorch
    is not installed."""
    spec = find_spec("torch")
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin).with_name("version.py")
    try:
        stat = path.stat()
        version_spec = spec_from_file_location("_transformer_torch_version", path)
        assert version_spec is not None and version_spec.loader is not None
        module = module_from_spec(version_spec)
        version_spec.loader.exec_module(module)  # plain assignments (typing imported)
    except (OSError, AssertionError, SyntaxError, ImportError):
        return None
    return {"version": str(getattr(module, "__version__", "")), "cuda": getattr(module, "cuda", None),
            "hip": getattr(module, "hip", None), "file": f"{path}:{stat.st_size}:{stat.st_mtime_ns}"}


def cuda_surely_absent() -> bool:
    """True when PyTorch can see no CUDA device here, known without importing it: its build has
    neither CUDA nor ROCm, or the machine shows no GPU device node (``/dev/nvidia*``, ``/dev/kfd``,
    WSL's ``/dev/dxg``). With PyTorch imported, it is asked. False means "ask PyTorch"."""
    if "torch" in sys.modules:
        import torch

        return not torch.cuda.is_available()
    build = torch_build()
    if build is None or (build["cuda"] is None and build["hip"] is None):
        return True
    dev = Path("/dev")
    return not any(dev.glob("nvidia*")) and not (dev / "kfd").exists() and not (dev / "dxg").exists()


def physical_cores(*, anywhere: bool = False) -> int:
    """The physical cores among the CPUs this process may run on (``anywhere``: of the whole
    machine); hyperthreads of one core count once; the CPU count where the topology cannot be
    read."""
    try:
        cpus = sorted(range(os.cpu_count() or 1) if anywhere else os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
    cores = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add(((topology / "physical_package_id").read_text().strip(),
                       (topology / "core_id").read_text().strip()))
        except OSError:
            return len(cpus) or 1
    return len(cores) or 1


def _env_threads(name: str) -> int | None:
    try:
        value = int(os.environ.get(name, ""))
    except ValueError:
        return None
    return value if value > 0 else None


def intra_op_threads() -> int:
    """PyTorch's intra-op thread count (what CTranslate2 is given too): asked of PyTorch when it is
    imported, else the count it takes when imported. On x86 that is MKL's: ``MKL_NUM_THREADS``,
    else ``OMP_NUM_THREADS``, never above the machine's physical cores unless
    ``MKL_DYNAMIC=FALSE``; without them, the physical cores this process may run on; elsewhere OpenMP's (``OMP_NUM_THREADS``, else the CPUs it
    may run on)."""
    if "torch" in sys.modules:
        import torch

        return torch.get_num_threads()
    if platform.machine().lower() in ("x86_64", "amd64"):
        asked = _env_threads("MKL_NUM_THREADS") or _env_threads("OMP_NUM_THREADS")
        if asked is None:
            return physical_cores()
        dynamic = os.environ.get("MKL_DYNAMIC", "").strip().lower() not in ("false", "0", "no")
        return min(asked, physical_cores(anywhere=True)) if dynamic else asked
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return _env_threads("OMP_NUM_THREADS") or cpus


def set_intra_op_threads(threads: int) -> None:
    """Make PyTorch's intra-op thread count ``threads``: set now when PyTorch is imported, else
    through the environment it reads when imported (so that a process that never imports it
    does not, and :func:`intra_op_threads` answers ``threads`` either way)."""
    if "torch" in sys.modules:
        import torch

        torch.set_num_threads(threads)
        return
    os.environ.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), MKL_DYNAMIC="FALSE")


def cache_root() -> Path:
    """Where the machine's facts are cached: ``$XDG_CACHE_HOME/transformer/machine``, else
    ``~/.cache/transformer/machine``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "transformer" / "machine"


def _cpu_key() -> dict[str, Any]:
    """Everything PyTorch's view of the CPU depends on: its build, the CPU's model and every flag
    it reports, the architecture and the environment variables of CPU_ENV."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    head = cpuinfo.split("\n\n", 1)[0]  # the first CPU's block: model and flags
    return {"format": CACHE_FORMAT, "kind": "cpu", "torch": torch_build(), "arch": platform.machine(),
            "cpu": hashlib.sha256(head.encode()).hexdigest(),
            "env": {name: os.environ.get(name) for name in CPU_ENV}}


def _cache_file(key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return cache_root() / f"{key['kind']}-{digest}.json"


def _read_cached(key: dict[str, Any]) -> dict[str, Any] | None:
    """The facts cached under ``key``, or None (missing, unreadable, or written for another key)."""
    try:
        data = json.loads(_cache_file(key).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != json.loads(json.dumps(key)):
        return None
    facts = data.get("facts")
    return facts if isinstance(facts, dict) else None


def _write_cached(key: dict[str, Any], facts: dict[str, Any]) -> None:
    """Cache ``facts`` under ``key`` (written to a temporary file and renamed; a cache that cannot
    be written is skipped: the next process asks PyTorch again)."""
    path = _cache_file(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "w") as f:
            json.dump({"key": key, "facts": facts}, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        return


@functools.cache
def detect() -> Machine:
    """This machine: its CPU and CUDA devices (asked once per process). Without PyTorch imported,
    on a machine where no CUDA device can be (:func:`cuda_surely_absent`), PyTorch is not
    imported: its version is read from its build and the CPU as :func:`detect_cpu` reads it."""
    if "torch" not in sys.modules and cuda_surely_absent():
        build = torch_build()
        return Machine(cpu=detect_cpu(), cuda=(), torch=build["version"] if build else "")
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
