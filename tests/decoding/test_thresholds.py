"""The decoding crossovers are chosen by the kind of CPU: a measured table for AVX-512 and AVX2,
the more conservative of the two for any other kind; decoders and kernels take the table they are
given."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from transformer.decoding import FastDecoder, kernels
from transformer.decoding import thresholds as T
from transformer.hardware import CpuInfo, detect_cpu


def cpu(arch: str, capability: str, engines: tuple[str, ...] = ("x86", "fbgemm", "qnnpack")) -> CpuInfo:
    return CpuInfo(arch=arch, model="test CPU", capability=capability, flags=(),
                   mkldnn_bf16=False, quantized_engines=engines)


MACHINES = {  # name -> (CpuInfo, the table it must get)
    "Zen 4 / Sapphire Rapids (AVX512)": (cpu("x86_64", "AVX512"), T.AVX512),
    "AVX-512 under another name": (cpu("x86_64", "avx512_vnni"), T.AVX512),
    "Haswell / Zen 2 (AVX2)": (cpu("x86_64", "AVX2"), T.AVX2),
    "Zen 4 with ATEN_CPU_CAPABILITY=avx2": (cpu("AMD64", "avx2"), T.AVX2),
    "x86 without AVX2": (cpu("x86_64", "DEFAULT"), T.DEFAULT),
    "Graviton 2 (ARM NEON)": (cpu("aarch64", "NEON", ("qnnpack",)), T.DEFAULT),
    "Graviton 3 (ARM SVE256)": (cpu("aarch64", "SVE256", ("qnnpack",)), T.DEFAULT),
    "Apple M (arm64, DEFAULT)": (cpu("arm64", "DEFAULT", ("qnnpack",)), T.DEFAULT),
    "ARM claiming AVX2 (nonsense)": (cpu("aarch64", "AVX2", ("qnnpack",)), T.DEFAULT),
    "unknown ISA": (cpu("riscv64", "RVV"), T.DEFAULT),
}


@pytest.mark.parametrize("name", list(MACHINES))
def test_capability_chooses_the_table(name):
    info, want = MACHINES[name]
    assert T.thresholds_for(info) == want


def test_the_measured_tables_differ_and_the_default_is_the_conservative_one():
    """Otherwise the choice above could not show; the default takes, crossover by crossover, the
    measured value that takes the special path in fewest cases."""
    assert T.AVX2 != T.AVX512
    for f in dataclasses.fields(T.DecodingThresholds):
        values = [getattr(t, f.name) for t in T.MEASURED.values()]
        safe = max(values) if f.metadata["safe"] == "high" else min(values)
        assert getattr(T.DEFAULT, f.name) == safe, f.name


def test_this_machine_gets_its_capability_s_table(random_model, use_thresholds):
    assert T.decoding_thresholds() == T.thresholds_for(detect_cpu())
    chosen = use_thresholds(fold_max_sentences=0)  # what this machine's choice returns
    assert FastDecoder(random_model(0)).thresholds is chosen


@pytest.mark.parametrize("bad", [dict(pack_min_work=-1), dict(fold_max_sentences=1.5),
                                 dict(big_weight=True)])
def test_bad_values_are_refused(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        dataclasses.replace(T.AVX512, **bad)


def test_a_decoder_uses_the_table_it_is_given(random_model, sources):
    """Folding the cross-attention into the memory and the cache layout follow the decoder's own
    thresholds, not the machine's."""
    model = random_model(0).eval()
    src = sources(0, 3)
    fold = dataclasses.replace(T.decoding_thresholds(), fold_max_sentences=3, flat_cache_max_rows=2)
    keep = dataclasses.replace(fold, fold_max_sentences=2, flat_cache_max_rows=3)
    with torch.inference_mode():
        folded = FastDecoder(model, thresholds=fold).start(src)
        unfolded = FastDecoder(model, thresholds=keep).start(src)
    assert folded.folded is not None and unfolded.folded is None
    assert type(folded.self_caches[0]).__name__ == "KVCache"  # 3 rows > 2
    assert type(unfolded.self_caches[0]).__name__ == "StepCache"


@pytest.mark.parametrize(("rows", "keys", "spelled"), [(8, 40, True), (7, 40, False), (8, 20, False)])
def test_step_attention_follows_the_table(rows, keys, spelled, monkeypatch):
    seen = []
    original = kernels.attention
    monkeypatch.setattr(kernels, "attention",
                        lambda *a, need_weights, **kw: seen.append(need_weights) or original(*a, need_weights=need_weights, **kw))
    table = dataclasses.replace(T.AVX512, single_query_rows=8, single_query_keys=20, flat_cache_max_rows=0)
    q, k = torch.randn(rows, 2, 1, 4), torch.randn(rows, 2, keys, 4)
    out = kernels.step_attention(q, k, k, thresholds=table)
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, k))
    assert seen == [spelled]
