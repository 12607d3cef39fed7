"""GPU check, decoding: greedy and beam search (beam 4) on the device equal the CPU's token for
token, cached equal uncached on the device, and bf16 decoding runs. A row that differs passes only
as a floating-point tie, and is reported."""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch

from transformer import ModelConfig, Transformer

pytestmark = pytest.mark.cuda
TIE_LOGPROB = 1e-4  # greedy rows that differ: log-probability gap at the first difference
TIE_SCORE = 1e-3  # beam rows that differ: gap between the two hypotheses' scores
BOS, EOS = 2, 3


def first_difference_gap(model: Transformer, src_row: torch.Tensor, a: list[int], b: list[int]
                         ) -> tuple[int, float]:
    """Where two greedy outputs first differ (past its end a row's token is EOS) and the gap
    between the two tokens' log-probabilities there, under ``model`` (CPU, fp32)."""
    longest = max(len(a), len(b))
    p = next(i for i in range(longest + 1)
             if (a[i] if i < len(a) else EOS) != (b[i] if i < len(b) else EOS))
    ta, tb = (a[p] if p < len(a) else EOS), (b[p] if p < len(b) else EOS)
    prefix = torch.tensor([[BOS, *a[:p]]])
    with torch.no_grad():
        scores = model(src_row[None], prefix)[0, -1].float().log_softmax(-1)
    return p, abs(scores[ta] - scores[tb]).item()


def compare_greedy(a: list[list[int]], b: list[list[int]], model: Transformer,
                   src: torch.Tensor) -> dict[str, Any]:
    gaps = []
    for row, (x, y) in enumerate(zip(a, b, strict=True)):
        if x != y:
            pos, gap = first_difference_gap(model, src[row], x, y)
            gaps.append({"row": row, "position": pos, "logprob_gap": gap})
    return {"identical_share": 1 - len(gaps) / len(a), "differing": gaps,
            "unexplained": sum(g["logprob_gap"] > TIE_LOGPROB for g in gaps)}


def compare_beam(a: list[list[tuple[list[int], float]]], b: list[list[tuple[list[int], float]]]
                 ) -> dict[str, Any]:
    def best(hyps: list[tuple[list[int], float]]) -> tuple[list[int], float]:
        return hyps[0] if hyps else ([], -math.inf)

    diffs = []
    for row, (x, y) in enumerate(zip(a, b, strict=True)):
        (ids_x, score_x), (ids_y, score_y) = best(x), best(y)
        if ids_x != ids_y:
            gap = abs(score_x - score_y) if math.isfinite(score_x - score_y) else math.inf
            diffs.append({"row": row, "score_gap": gap})
    return {"identical_share": 1 - len(diffs) / len(a), "differing": diffs,
            "unexplained": sum(d["score_gap"] > TIE_SCORE for d in diffs)}


@pytest.mark.timeout(60)
def test_decoding_on_the_device_equals_the_cpu(gpu, record):
    from transformer.decoding import beam_search, greedy_decode

    if gpu.quick:
        cfg = ModelConfig.tiny(64, dropout=0.0, max_len=32)
        max_len, src_len = 10, 8
    else:
        cfg = ModelConfig.small(1000, dropout=0.0, max_len=64)
        max_len, src_len = 24, 20
    record.tolerance = (f"token for token; a differing row passes only as a floating-point tie "
                        f"(greedy: log-prob gap <= {TIE_LOGPROB:g} where rows part; beam: score "
                        f"gap <= {TIE_SCORE:g}), reported")
    torch.manual_seed(0)
    cpu_model = Transformer(cfg).eval()
    dev_model = copy.deepcopy(cpu_model).to(gpu.device).eval()
    src = gpu.random_sources(16, cfg.src_vocab_size, min_len=4, max_len=src_len, seed=7)
    src_dev = src.to(gpu.device)
    common = dict(bos_id=BOS, eos_id=EOS, max_len=max_len)
    beam = dict(beam_size=4, length_penalty=0.6, nbest=1)
    # on a CPU "the device" is the CPU too: its run multiplies by plain weights, the reference
    # by the packed ones, so the comparison still crosses two code paths
    on_dev = dict(pack_weights=False) if not gpu.cuda else {}
    record.figures.update(config=cfg.to_dict(), sources=16, max_len=max_len, beam_size=4,
                          reference="CPU, fp32, cached, packed weights",
                          device_run=f"{gpu.device}, fp32" + (", unpacked" if on_dev else ""))
    timings = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        out = fn()
        timings[name] = round(time.perf_counter() - start, 3)
        return out

    greedy_cpu = timed("greedy_cpu", lambda: greedy_decode(cpu_model, src, **common))
    greedy_dev = timed("greedy_device",
                       lambda: greedy_decode(dev_model, src_dev, **common, **on_dev))
    beam_cpu = timed("beam_cpu", lambda: beam_search(cpu_model, src, **common, **beam))
    beam_dev = timed("beam_device",
                     lambda: beam_search(dev_model, src_dev, **common, **beam, **on_dev))
    greedy_unc = timed("greedy_device_uncached",
                       lambda: greedy_decode(dev_model, src_dev, **common, use_cache=False))
    beam_unc = timed("beam_device_uncached",
                     lambda: beam_search(dev_model, src_dev, **common, **beam, use_cache=False))
    comparisons = {
        "greedy device == CPU": compare_greedy(greedy_cpu, greedy_dev, cpu_model, src),
        "beam-4 device == CPU": compare_beam(beam_cpu, beam_dev),
        "greedy cached == uncached (device)": compare_greedy(greedy_dev, greedy_unc, cpu_model,
                                                             src),
        "beam-4 cached == uncached (device)": compare_beam(beam_dev, beam_unc),
    }
    for name, c in comparisons.items():
        record.figures[name] = c
        ties = len(c["differing"]) - c["unexplained"]
        record.check(name, c["unexplained"] == 0,
                     f"{c['identical_share']:.0%} of rows identical, {ties} tie(s), "
                     f"{c['unexplained']} unexplained")
    tokens = sum(len(r) for r in greedy_cpu)
    record.figures["greedy_tokens"] = tokens
    record.check("outputs are not empty", tokens > 0, f"{tokens} greedy tokens")
    # bf16: the weights in bf16 on the device, decoded as they are
    low = copy.deepcopy(cpu_model).to(gpu.device, dtype=torch.bfloat16).eval()
    greedy_low = timed("greedy_device_bf16", lambda: greedy_decode(low, src_dev, **common))
    beam_low = timed("beam_device_bf16", lambda: beam_search(low, src_dev, **common, **beam))
    valid = (len(greedy_low) == len(beam_low) == 16
             and all(0 < t < cfg.tgt_vocab_size and t != gpu.PAD for r in greedy_low for t in r)
             and all(len(r) <= max_len for r in greedy_low)
             and all(r and math.isfinite(r[0][1]) for r in beam_low))
    agree = sum(x == y for x, y in zip(greedy_low, greedy_dev, strict=True)) / 16
    agree_beam = sum(bool(x and y) and x[0][0] == y[0][0]
                     for x, y in zip(beam_low, beam_dev, strict=True)) / 16
    record.figures.update(bf16_greedy_rows_equal_fp32=agree, bf16_beam_rows_equal_fp32=agree_beam)
    record.check("bf16 greedy and beam-4 run", valid,
                 f"rows equal to fp32: greedy {agree:.0%}, beam {agree_beam:.0%} (not a tolerance)")
    record.figures["seconds"] = timings
    shares = [f"{c['identical_share']:.0%}" for c in comparisons.values()]
    record.summary = (f"identical rows: greedy dev/CPU {shares[0]}, beam {shares[1]}; "
                      f"cached/uncached {shares[2]}, {shares[3]}; bf16 greedy = fp32 {agree:.0%}")
    assert not record.failures(), "\n".join(record.failures())
