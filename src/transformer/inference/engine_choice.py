"""Which engine ``--engine auto`` decodes with: a measured rule, keyed by what the CPU can do.

``auto`` runs CTranslate2 where it was measured faster than ours for the precision, the model's
width and the kind of CPU, and ours everywhere else: on a GPU, in bf16 (CTranslate2 has no bf16
on a CPU), for a model narrower or wider than the ones measured, on a CPU of a kind not measured
(ARM, plain x86), and where CTranslate2 is not installed. In int8 where CTranslate2's int8 GEMM
saturates (oneDNN without VNNI: :func:`transformer.convert.ctranslate2.onednn_int8_saturates`),
the engine's conversion stores 7-bit weights, which it does not saturate on. The figures behind
each entry are ``benchmarks/decoding.py`` engines rows (1 thread, greedy and beam 5, batch 1 and
16, forced 32-token outputs, CTranslate2 4.8, torch 2.13), quoted in docs/explanation/results.md.

The rule is a pure function of a :class:`~transformer.hardware.CpuInfo` (:func:`auto_engine`), so
tests run it over machines this one is not.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer.hardware import CpuInfo

TORCH, CTRANSLATE2 = "torch", "ctranslate2"


@dataclass(frozen=True)
class EngineRule:
    """One kind of CPU's measured choice: for each precision, the faster engine for models of
    ``d_model`` in ``[min_d_model, max_d_model]`` (the widths measured)."""

    fastest: tuple[tuple[str, str], ...]  # (precision, engine)
    min_d_model: int
    max_d_model: int

    def engine(self, precision: str, d_model: int) -> str:
        if not self.min_d_model <= d_model <= self.max_d_model:
            return TORCH
        return dict(self.fastest).get(precision, TORCH)


# Zen 4 (AMD EPYC, AVX-512 with VNNI), 1 thread: CTranslate2 faster than ours in every row at
# d_model 128 (4+4 layers) and 256 (3+3): float32 ours/CT2 0.4-0.9 (greedy and beam 5, batch 1
# and 16), int8 ours/CT2 0.15-0.5 (results.md, "Choosing an engine").
AVX512 = EngineRule(fastest=(("fp32", CTRANSLATE2), ("int8", CTRANSLATE2)),
                    min_d_model=128, max_d_model=256)
# The same machine lowered to AVX2 (ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
# MKL_ENABLE_INSTRUCTIONS=AVX2 CT2_FORCE_CPU_ISA=AVX2): float32 as at AVX-512; int8 ours/CT2
# 0.27-0.92, CTranslate2 on its 7-bit weights (oneDNN's kernel there saturates on 8-bit ones).
AVX2 = EngineRule(fastest=(("fp32", CTRANSLATE2), ("int8", CTRANSLATE2)),
                  min_d_model=128, max_d_model=256)

MEASURED: dict[str, EngineRule] = {"AVX512": AVX512, "AVX2": AVX2}


def rule_for(cpu: CpuInfo) -> EngineRule | None:
    """The measured rule of ``cpu``'s kind (``AVX512*`` as AVX512), or None for a kind not measured."""
    if not cpu.is_x86:
        return None
    capability = cpu.capability.upper()
    return MEASURED.get("AVX512" if capability.startswith("AVX512") else capability)


def auto_engine(cpu: CpuInfo, *, precision: str, d_model: int, device: str,
                ctranslate2_types: frozenset[str]) -> tuple[str, str]:
    """``(engine, why)`` for ``--engine auto``: ``precision`` is the one that runs (fp32, bf16,
    int8), ``device`` the model's device type, ``ctranslate2_types`` the compute types
    CTranslate2 offers on this CPU (empty: not installed). ``why`` is one line for the log."""
    if not ctranslate2_types:
        return TORCH, "CTranslate2 is not installed"
    if device != "cpu":
        return TORCH, f"the model is on {device}; the rule is measured on CPUs"
    if CT2_COMPUTE_TYPES.get(precision) not in ctranslate2_types:
        return TORCH, f"CTranslate2 has no {precision} on this CPU"
    rule = rule_for(cpu)
    if rule is None:
        return TORCH, f"no engine measured on {cpu.arch} {cpu.capability}"
    engine = rule.engine(precision, d_model)
    if engine == TORCH:
        return TORCH, (f"ours measured faster or d_model {d_model} outside the measured "
                       f"{rule.min_d_model}-{rule.max_d_model} on {cpu.capability}")
    return engine, f"measured faster at {precision} on {cpu.capability}"


# our inference precision -> CTranslate2's compute type
CT2_COMPUTE_TYPES = {"fp32": "float32", "int8": "int8", "bf16": "bfloat16"}
