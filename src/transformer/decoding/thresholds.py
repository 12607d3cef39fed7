"""The decoding fast path's crossovers, measured per kind of CPU and chosen by what this one can do.

Each number below says from where one way of computing a decoding step is faster than another
(a packed or int8 product against a plain one, SDPA against spelled-out matmuls, one cache layout
against another). They were measured with ``benchmarks/decoding.py --suite kernels`` and whole
searches (``benchmarks/decoding.py``), 1 thread, torch 2.13, and they move with the instruction
set: at AVX2 oneDNN's packed float32 product has half the vector width for the same fixed cost a
call, so it pays from more rows. So they are a table keyed by ATen's CPU capability
(:attr:`transformer.hardware.CpuInfo.capability`, which ``ATEN_CPU_CAPABILITY`` can lower), and a
CPU of a kind not measured (ARM, plain x86, anything new) gets the more conservative of the
measured values for each crossover: the special path in fewer cases (STYLE.md, habit 11).

The choice is a pure function of a :class:`~transformer.hardware.CpuInfo`
(:func:`thresholds_for`), so tests run it over machines this one is not; :func:`decoding_thresholds`
asks this machine once. A :class:`~transformer.decoding.fast_decoder.FastDecoder` takes its own
``thresholds=`` to compare tables side by side in one process.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

from transformer.hardware import CpuInfo, detect_cpu

# How to merge two measured tables into a safe default: "high" takes the larger value (the
# special path from more rows, keys or scores), "low" the smaller (for fewer rows or sentences).
_SAFE = "safe"


@dataclass(frozen=True)
class DecodingThresholds:
    """Crossovers of one kind of CPU. ``work`` is rows x weight elements of one product."""

    # packing.step_linear: a weight of at least this many elements is "big": at one row it
    # multiplies by a row-major copy of its transpose (one addmm) rather than F.linear, and it
    # takes int8 at every row count
    big_weight: int = field(metadata={_SAFE: "high"})
    # packing.step_linear: oneDNN's packed float32 product from this much work on a weight
    # smaller than big_weight...
    pack_min_work: int = field(metadata={_SAFE: "high"})
    # ...from this much on a big one...
    pack_min_work_big: int = field(metadata={_SAFE: "high"})
    # ...and never below this many rows for a big weight
    pack_min_rows_big: int = field(metadata={_SAFE: "high"})
    # packing.step_linear: the int8 product (precision="int8") from this much work on a weight
    # smaller than big_weight
    int8_min_work: int = field(metadata={_SAFE: "high"})
    # kernels.step_attention: one query a row takes the spelled-out matmuls rather than SDPA
    # against more keys than this, in a batch of at least single_query_rows rows
    single_query_keys: int = field(metadata={_SAFE: "high"})
    single_query_rows: int = field(metadata={_SAFE: "high"})
    # fast_decoder: self-attention caches of at most this many rows are StepCaches (read by SDPA;
    # so below single_query_rows), more rows KVCaches and beam search's SlotCaches
    flat_cache_max_rows: int = field(metadata={_SAFE: "low"})
    # fast_decoder: a search of at most this many sentences folds the cross-attention's
    # projections into the memory (folded_cross)
    fold_max_sentences: int = field(metadata={_SAFE: "low"})
    # common.argmax_rows: from this many scores (rows x vocabulary) the best token is found in
    # two rounds over chunks of the vocabulary
    argmax_min_scores: int = field(metadata={_SAFE: "high"})

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{f.name} must be a non-negative integer, got {value!r}")
        if self.flat_cache_max_rows >= self.single_query_rows:
            raise ValueError("flat_cache_max_rows must be below single_query_rows (a StepCache's "
                             f"strided keys are read by SDPA), got {self.flat_cache_max_rows} and "
                             f"{self.single_query_rows}")

    def to_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def conservative(*tables: DecodingThresholds) -> DecodingThresholds:
    """For each crossover, the value of ``tables`` that takes the special path in fewest cases."""
    values = {}
    for f in dataclasses.fields(DecodingThresholds):
        pick = max if f.metadata[_SAFE] == "high" else min
        values[f.name] = pick(getattr(t, f.name) for t in tables)
    return DecodingThresholds(**values)


# Zen 4 (AMD EPYC, AVX-512), 2 cores, 1 thread, torch 2.13: the values the fast path was tuned
# with (benchmarks/results/decoding_kernels.json and whole searches, in-process A/B).
AVX512 = DecodingThresholds(
    big_weight=1 << 17,  # d_model 256's projections and feed-forward layers, output projections
    pack_min_work=3 << 18,  # d_model 128's Q/K/V weight from 16 rows
    pack_min_work_big=3 << 18,  # 768 x 256 from 4 rows, 1024 x 256 from 3
    pack_min_rows_big=2,  # an output projection packed from 2 rows (2-3x at 4)
    int8_min_work=1 << 19,  # from 11 rows for d_model 128's Q/K/V weight, 8 for 256 x 256
    single_query_keys=32,  # spelled out 4x faster at 100 keys, batch 80; equal near 30 keys
    single_query_rows=32,  # ... and near 16 rows; SDPA 2-3x faster at a few rows
    flat_cache_max_rows=24,  # StepCaches 1.1-1.2x at 5 and 20 rows
    fold_max_sentences=4,  # folding pays for the few sentences of an interactive request
    argmax_min_scores=3 << 13,  # chunked 22 us against 72 for 16 x 8000; plain faster at 1 row
)

# The same machine with ATen, oneDNN, MKL and CTranslate2 lowered to AVX2 (ATEN_CPU_CAPABILITY=avx2
# ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 CT2_FORCE_CPU_ISA=AVX2), kernels suite in
# three runs alternating with two at AVX-512, the other core busy
# (benchmarks/results/decoding_kernels-avx2-forced.json). oneDNN's packed product gains less at
# AVX2: on a weight below big_weight (every d_model 128 weight, 256 x 256) it is slower than plain
# F.linear at every row count measured (1.1-2.2x at 16-32 rows, 1.02-1.35x at 80); on the big
# weights it still pays from 2 rows (768 x 256 1.03-1.08x, 1024 x 256 1.1-1.3x, the output
# projections 1.2-2.3x), as at AVX-512. MKL's plain products (F.linear, the transposed addmm),
# SDPA against the spelled-out attention and the two-round argmax cross where they did. In whole
# searches (in-process A/B) folding still pays for 1-4 sentences (1.02-1.16x) and StepCaches for
# 5-20 rows (about 1.0-1.2x). fbgemm (int8) picks its kernels from the CPU's own flags and cannot
# be lowered here, so int8's crossover is AVX-512's, unmeasured at AVX2.
AVX2 = dataclasses.replace(AVX512, pack_min_work=1 << 22)  # 256 x 256 from 64 rows, 128 x 128 from 256

MEASURED: dict[str, DecodingThresholds] = {"AVX512": AVX512, "AVX2": AVX2}
DEFAULT = conservative(*MEASURED.values())  # any CPU of a kind not measured


def thresholds_for(cpu: CpuInfo) -> DecodingThresholds:
    """The crossovers for ``cpu``: its capability's measured table (``AVX512*`` as AVX512), else
    :data:`DEFAULT`."""
    capability = cpu.capability.upper()
    if cpu.is_x86 and capability.startswith("AVX512"):
        capability = "AVX512"
    return MEASURED.get(capability, DEFAULT) if cpu.is_x86 else DEFAULT


@functools.cache
def decoding_thresholds() -> DecodingThresholds:
    """This machine's crossovers (asked once per process)."""
    return thresholds_for(detect_cpu())
