"""Decoding benchmark: tokens per second of our decoding against CTranslate2 and Hugging Face
``transformers`` running the same weights, and (``--suite cache``) what our key/value cache and
weight packing are worth.

``--suite engines`` (the default): for two shapes, the ``small`` preset's (d_model 256, 4 heads,
3 + 3 layers, d_ff 1024) and the ``multi30k-cpu`` recipe's (d_model 128, 4 heads, 4 + 4 layers,
d_ff 256), both with an 8000-token shared and tied vocabulary and random weights, our model is
written through ``ctranslate2.specs.TransformerSpec`` (``transformer.convert.save_ctranslate2``,
float32 and int8) and into a Hugging Face ``MarianMTModel`` of the same shape (its own random
weights: the same arithmetic, not the same outputs). Before timing, CTranslate2's greedy and beam
outputs are checked equal to ours. Then greedy and beam 5, at batch 1 (8 sentences one at a time:
the latency of a sentence typed into a prompt) and batch 16, every output forced to ``--length``
tokens: ours fp32 against CTranslate2 fp32, ours ``precision="int8"`` against CTranslate2 int8,
and ours fp32 against HF fp32 (``generate``). Runs are interleaved and repeated; the fastest repeat
of each counts, so ratios are side by side on the same CPU (1 thread each).

``--suite cache``: the model of the ``small`` preset with and without the cache and packing.

``--suite profile``: the engines suite's models, batches and searches, ours in fp32 and int8, each
run once more under ``torch.profiler``: milliseconds per step, and the operators' own time per
step by group (products, attention, layer norm, other operators, and the time outside any
operator: Python and dispatch), beside CTranslate2's whole step when it is installed.

In the cache suite the model has the shape of ``ModelConfig.small`` (d_model 256, 4 heads, 3 + 3 layers, d_ff 1024)
with an 8000-token shared vocabulary and random weights; the Hugging Face model is a
``MarianMTModel`` built from a ``MarianConfig`` of the same shape (random weights, nothing
downloaded; ReLU, shared and tied embeddings like ours). Every output is forced to the same length
(EOS forbidden before it: our ``min_len``, their ``min_new_tokens``), so all runs produce exactly
``batch x length`` tokens. For each output length the runs are interleaved and repeated, and the
fastest repeat of each counts, so the ratios are side by side on the same (shared, noisy) CPU.

- ``cache``: our decoding with the key/value cache (the default).
- ``unpacked``: the cache, but a ``FastDecoder(model, pack_weights=False)`` (plain ``F.linear``),
  to show what packing the decoder's weights for oneDNN is worth (:mod:`transformer.decoding.packing`;
  fp32 only). Each run is given its decoder, built once, as the ``Translator`` does.
- ``no cache``: ``use_cache=False``: the whole prefix goes through the decoder every step (and, as
  in any loop over ``model.decode``, every position is projected onto the vocabulary).
- ``HF``: ``MarianMTModel.generate(num_beams=1 or 5, do_sample=False)`` with its cache.

    make bench                    # pip install -e '.[bench]': transformers and ctranslate2
    .venv/bin/python benchmarks/decoding.py                  # -> benchmarks/results/decoding_engines.json
    .venv/bin/python benchmarks/decoding.py --quick          # smoke run of seconds (JSON to the temp dir)
    .venv/bin/python benchmarks/decoding.py --suite cache    # -> benchmarks/results/decoding.json
    .venv/bin/python benchmarks/decoding.py --suite kernels  # -> benchmarks/results/decoding_kernels.json
    .venv/bin/python benchmarks/decoding.py --suite profile  # -> benchmarks/results/decoding_profile.json
    .venv/bin/python benchmarks/decoding.py --suite cache --precision bf16 --output ...   # bf16

``--compare-thresholds AVX512`` (engines): ours also with another CPU kind's decoding crossovers
(``transformer.decoding.thresholds``), interleaved with this machine's own, for an old-against-new
comparison in one process. An AVX-512 machine behaves as an AVX2 one under
``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2
CT2_FORCE_CPU_ISA=AVX2`` (fbgemm's int8 kernels excepted: they follow the CPU's own flags); the
JSON records the machine as PyTorch sees it and those variables (``benchmarks/machine.py``).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from machine import cpu_name, describe  # benchmarks/machine.py
from transformer import ModelConfig, Transformer
from transformer.decoding import FastDecoder, beam_search, greedy_decode
from transformer.decoding.packing import can_pack
from transformer.decoding.thresholds import MEASURED, decoding_thresholds

RESULTS = Path(__file__).resolve().parent / "results" / "decoding.json"
ENGINES_RESULTS = RESULTS.with_name("decoding_engines.json")
PAD, BOS, EOS = 0, 2, 3


def build_models(*, vocab: int, d_model: int, heads: int, layers: int, d_ff: int, hf: bool):
    """Our Transformer and (optionally) a Hugging Face Marian model of the same shape."""
    config = ModelConfig(
        src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model, num_heads=heads,
        num_encoder_layers=layers, num_decoder_layers=layers, d_ff=d_ff, dropout=0.0,
        max_len=256, share_embeddings=True, tie_embeddings=True,
    )
    torch.manual_seed(0)
    ours = Transformer(config).eval()
    theirs = None
    if hf:
        from transformers import MarianConfig, MarianMTModel
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        theirs = MarianMTModel(
            MarianConfig(
                vocab_size=vocab, d_model=d_model, encoder_layers=layers, decoder_layers=layers,
                encoder_attention_heads=heads, decoder_attention_heads=heads,
                encoder_ffn_dim=d_ff, decoder_ffn_dim=d_ff, max_position_embeddings=256,
                activation_function="relu", dropout=0.0, attention_dropout=0.0,
                activation_dropout=0.0, pad_token_id=PAD, eos_token_id=EOS, bos_token_id=BOS,
                decoder_start_token_id=BOS, forced_eos_token_id=None,
            )
        ).eval()
    return ours, theirs


def random_sources(*, batch: int, src_len: int, vocab: int, seed: int) -> torch.Tensor:
    """(batch, src_len) ids, right-padded, lengths spread over [src_len / 2, src_len]."""
    g = torch.Generator().manual_seed(seed)
    src = torch.full((batch, src_len), PAD, dtype=torch.long)
    for i in range(batch):
        n = src_len // 2 + int(torch.randint(0, src_len - src_len // 2 + 1, (1,), generator=g))
        src[i, :n] = torch.randint(4, vocab, (n,), generator=g)
    return src


def timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    """Run ``fn``: (wall seconds, CPU seconds of this process, what it returned)."""
    wall, cpu = time.perf_counter(), time.process_time()
    returned = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, returned


def runners(ours, theirs, src: torch.Tensor, *, length: int, beam: int, decoders: dict[bool, FastDecoder],
            uncached: bool = True) -> dict[str, Callable[[], int]]:
    """name -> a function that decodes the batch at the forced ``length`` and returns the number
    of tokens produced (checked to be batch x length). ``decoders``: ``ours``'s fast path, packed
    (True) and not, each built once for the whole run as a ``Translator`` builds its own."""
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=length, min_len=length)

    def ours_fn(use_cache: bool, pack: bool = True) -> Callable[[], int]:
        decoder = decoders[pack] if use_cache else None

        def run() -> int:
            if beam == 1:
                out = greedy_decode(ours, src, use_cache=use_cache, decoder=decoder, **kw)
            else:
                out = beam_search(ours, src, beam_size=beam, use_cache=use_cache, decoder=decoder, **kw)
            assert all(len(ids) == length for ids in out), "output length not forced"
            return sum(len(ids) for ids in out)

        return run

    fns = {"cache": ours_fn(True)}
    if can_pack(ours):
        fns["unpacked"] = ours_fn(True, pack=False)
    if uncached:
        fns["no cache"] = ours_fn(False)
    if theirs is not None:
        mask = (src != PAD).long()

        def hf() -> int:
            with torch.inference_mode():
                out = theirs.generate(
                    input_ids=src, attention_mask=mask, max_new_tokens=length,
                    min_new_tokens=length, num_beams=beam, do_sample=False,
                )
            new = out[:, 1:]  # without the decoder start token
            assert new.shape == (src.size(0), length) and not bool((new == PAD).any())
            return new.numel()

        fns["HF"] = hf
    return fns

# --- the engines suite ------------------------------------------------------------------------

SHAPES = {  # name -> the model's shape (vocabulary 8000, shared and tied)
    "d256 3+3": dict(d_model=256, heads=4, layers=3, d_ff=1024),
    "d128 4+4 (multi30k-cpu)": dict(d_model=128, heads=4, layers=4, d_ff=256),
}
ENGINES = ("ours fp32", "CT2 fp32", "ours int8", "CT2 int8", "HF fp32")
RATIOS = {"ours/CT2 fp32": ("ours fp32", "CT2 fp32"), "ours/CT2 int8": ("ours int8", "CT2 int8"),
          "ours/HF fp32": ("ours fp32", "HF fp32")}


def ct2_translators(model, vocabulary: list[str], directory: Path) -> dict:
    """CTranslate2 translators of ``model``'s own weights: float32 and int8, 1 thread each."""
    import ctranslate2

    from transformer.convert import save_ctranslate2

    out = {}
    for name, quantization in (("CT2 fp32", None), ("CT2 int8", "int8")):
        save_ctranslate2(model, directory / name.replace(" ", "-"), source_vocabulary=vocabulary,
                         target_vocabulary=vocabulary, quantization=quantization)
        out[name] = ctranslate2.Translator(str(directory / name.replace(" ", "-")), device="cpu",
                                           intra_threads=1, inter_threads=1)
    return out


def engine_runs(ours, theirs, translators: dict, decoders: dict, batches: list[torch.Tensor],
                vocabulary: list[str], *, beam: int, length: int) -> dict[str, Callable[[], list]]:
    """engine -> a function that decodes every batch in ``batches`` in turn at the forced
    ``length`` and returns the hypotheses (lists of ids; HF: its own model's)."""
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=length, min_len=length)
    index = {piece: i for i, piece in enumerate(vocabulary)}

    def ours_fn(key: str) -> Callable[[], list]:
        decoder = decoders[key]
        precision = key.split()[0]  # "fp32", "int8", "fp32 (AVX512 thresholds)", ...

        def run() -> list:
            out = []
            for src in batches:
                if beam == 1:
                    out += greedy_decode(ours, src, decoder=decoder, precision=precision, **kw)
                else:
                    out += beam_search(ours, src, beam_size=beam, decoder=decoder,
                                       precision=precision, **kw)
            return out

        return run

    def ct2_fn(translator) -> Callable[[], list]:
        pieces = [[[vocabulary[i] for i in row if i != PAD] for row in src.tolist()] for src in batches]

        def run() -> list:
            out = []
            for chunk in pieces:
                results = translator.translate_batch(chunk, beam_size=beam, length_penalty=0.0,
                                                     max_decoding_length=length,
                                                     min_decoding_length=length)
                out += [[index[p] for p in r.hypotheses[0]] for r in results]
            return out

        return run

    def hf_fn() -> list:
        out = []
        for src in batches:
            with torch.inference_mode():
                generated = theirs.generate(
                    input_ids=src, attention_mask=(src != PAD).long(), max_new_tokens=length,
                    min_new_tokens=length, num_beams=beam, do_sample=False)
            out += generated[:, 1:].tolist()  # without the decoder start token
        return out

    fns = {"ours fp32": ours_fn("fp32"), **{k: ct2_fn(t) for k, t in translators.items()}}
    if "int8" in decoders:
        fns["ours int8"] = ours_fn("int8")
    fns.update({f"ours {key}": ours_fn(key) for key in decoders if " " in key})
    if theirs is not None:
        fns["HF fp32"] = hf_fn
    return fns


def check_same_outputs(fns: dict, *, method: str) -> float:
    """The share of CTranslate2 fp32's hypotheses equal to ours (float32 rounding may flip a rare
    near-tie); stops the benchmark below 90%: the two would not be decoding the same model."""
    ours, theirs = fns["ours fp32"](), fns["CT2 fp32"]()
    same = sum(a == b for a, b in zip(ours, theirs, strict=True)) / len(ours)
    if same < 0.9:
        raise SystemExit(f"CTranslate2's {method} output differs from ours on {1 - same:.0%} of the "
                         "sentences: the export is not the same model")
    return same


def engines_suite(args: argparse.Namespace) -> dict:
    import ctranslate2

    rows = []
    vocabulary = ["<pad>", "<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(4, args.vocab)]
    for shape_name, shape in args.shapes.items():
        ours, theirs = build_models(vocab=args.vocab, hf=not args.no_hf, **shape)
        translators = ct2_translators(ours, vocabulary, Path(tempfile.mkdtemp()))
        decoders = {"fp32": FastDecoder(ours), "int8": FastDecoder(ours, precision="int8")}
        for kind in args.compare_thresholds:  # the same, with another kind of CPU's crossovers
            for precision in ("fp32", "int8"):
                decoders[f"{precision} ({kind} thresholds)"] = FastDecoder(
                    ours, precision=precision, thresholds=MEASURED[kind])
        for batch in args.batches:
            count = 1 if batch > 1 else args.single_sentences
            batches = [random_sources(batch=batch, src_len=args.src_len, vocab=args.vocab, seed=s)
                       for s in range(count)]
            for beam, method in ((1, "greedy"), (5, "beam 5")):
                fns = engine_runs(ours, theirs, translators, decoders, batches, vocabulary,
                                  beam=beam, length=args.length)
                same = check_same_outputs(fns, method=method)  # also the warm-up
                for fn in fns.values():
                    fn()
                best: dict[str, float] = {}
                for _ in range(args.repeats):
                    for name, fn in fns.items():  # interleaved: each repeat runs every engine
                        t0 = time.perf_counter()
                        hypotheses = fn()
                        seconds = time.perf_counter() - t0
                        assert all(len(h) == args.length for h in hypotheses), name
                        best[name] = min(best.get(name, float("inf")), seconds)
                tokens = batch * count * args.length
                tps = {name: tokens / s for name, s in best.items()}
                row = {"shape": shape_name, "batch": batch, "method": method, "tokens": tokens,
                       "same_as_ct2": round(same, 3),
                       "tokens_per_s": {k: round(v, 1) for k, v in tps.items()},
                       "ms_per_token_step": {k: round(best[k] / (count * args.length) * 1e3, 3)
                                             for k in best}}
                row.update({r: round(tps[a] / tps[b], 2) for r, (a, b) in RATIOS.items()
                            if a in tps and b in tps})
                for kind in args.compare_thresholds:  # >1: this machine's crossovers are faster
                    for precision in ("fp32", "int8"):
                        other = tps[f"ours {precision} ({kind} thresholds)"]
                        row[f"ours/ours with {kind} thresholds {precision}"] = round(
                            tps[f"ours {precision}"] / other, 3)
                rows.append(row)
                print_engine_row(row, header=len(rows) == 1)
    return {"suite": "engines", "ctranslate2": ctranslate2.__version__, "length": args.length,
            "compared_thresholds": {k: MEASURED[k].to_dict() for k in args.compare_thresholds},
            "single_sentences": args.single_sentences, "rows": rows}


def print_engine_row(row: dict, *, header: bool) -> None:
    if header:
        print("tokens/s (1 thread); ratios above 1.0: ours faster")
        print(f"{'shape':24} {'batch':>5} {'method':7} " + " ".join(f"{e:>10}" for e in ENGINES)
              + " " + " ".join(f"{r:>14}" for r in RATIOS))
    tps = row["tokens_per_s"]
    cells = " ".join(f"{tps[e]:10.0f}" if e in tps else f"{'-':>10}" for e in ENGINES)
    ratios = " ".join(f"{row[r]:14.2f}" if r in row else f"{'-':>14}" for r in RATIOS)
    compared = "".join(f"  {k}: {v:.3f}" for k, v in row.items() if k.startswith("ours/ours with "))
    print(f"{row['shape']:24} {row['batch']:5d} {row['method']:7} {cells} {ratios}{compared}", flush=True)


# --- the profile suite ------------------------------------------------------------------------

# where a decoding step's time goes: profiler op names -> a group, the first match wins
OP_GROUPS = (
    ("products", ("aten::addmm", "aten::mm", "aten::addmv", "aten::mv", "_linear_pointwise",
                  "linear_dynamic")),
    ("attention", ("aten::bmm", "aten::baddbmm", "softmax", "scaled_dot_product")),
    ("layer norm", ("layer_norm",)),
)


def op_group(name: str) -> str:
    return next((group for group, keys in OP_GROUPS if any(k in name for k in keys)), "other ops")


def profiled_step(fn: Callable[[], object], steps: int, repeats: int) -> dict:
    """``fn`` (a decoding run of ``steps`` steps, warmed up here): its fastest wall time per step
    of ``repeats``, then one run under ``torch.profiler``: the operators' own time and calls per
    step by group, what no operator accounts for, and the top operators."""
    from torch.profiler import ProfilerActivity, profile

    fn()  # warm-up
    wall = min(timed(fn)[0] for _ in range(repeats))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        profiled = timed(fn)[0]
    groups: dict[str, float] = {}
    calls: dict[str, int] = {}
    events = prof.key_averages()
    for event in events:
        group = op_group(event.key)
        groups[group] = groups.get(group, 0.0) + event.self_cpu_time_total
        calls[group] = calls.get(group, 0) + event.count
    groups["outside ops"] = max(profiled * 1e6 - sum(groups.values()), 0.0)
    top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:8]
    return {"ms_per_step": round(wall / steps * 1e3, 3),
            "profiled_ms_per_step": round(profiled / steps * 1e3, 3),
            "share": {g: round(us / (profiled * 1e6), 3) for g, us in groups.items()},
            "us_per_step": {g: round(us / steps, 1) for g, us in groups.items()},
            "calls_per_step": {g: round(n / steps, 1) for g, n in calls.items()},
            "top_ops": [{"op": e.key, "us_per_step": round(e.self_cpu_time_total / steps, 1),
                         "calls_per_step": round(e.count / steps, 1)} for e in top]}


def profile_suite(args: argparse.Namespace) -> dict:
    """One decoding run under ``torch.profiler`` per shape, batch, search and precision: the
    step's wall time without the profiler, and under it the operators' own (self) time by group,
    calls per step, and what no operator accounts for (Python, dispatch, the profiler's own cost).
    With CTranslate2 installed, its fp32 and int8 step beside ours (same weights, as the engines
    suite)."""
    has_ct2 = importlib.util.find_spec("ctranslate2") is not None
    rows = []
    vocabulary = ["<pad>", "<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(4, args.vocab)]
    for shape_name, shape in args.shapes.items():
        ours, _ = build_models(vocab=args.vocab, hf=False, **shape)
        translators = (ct2_translators(ours, vocabulary, Path(tempfile.mkdtemp()))
                       if has_ct2 else {})
        decoders = {"fp32": FastDecoder(ours), "int8": FastDecoder(ours, precision="int8")}
        for batch in args.batches:
            count = 1 if batch > 1 else args.single_sentences
            batches = [random_sources(batch=batch, src_len=args.src_len, vocab=args.vocab, seed=s)
                       for s in range(count)]
            steps = count * args.length
            for beam, method in ((1, "greedy"), (5, "beam 5")):
                fns = engine_runs(ours, None, translators, decoders, batches, vocabulary,
                                  beam=beam, length=args.length)
                for precision in ("fp32", "int8"):
                    row = {"shape": shape_name, "batch": batch, "method": method,
                           "precision": precision,
                           **profiled_step(fns[f"ours {precision}"], steps, args.repeats)}
                    ct2 = fns.get(f"CT2 {precision}")
                    if ct2 is not None:
                        ct2()
                        row["ct2_ms_per_step"] = round(
                            min(timed(ct2)[0] for _ in range(args.repeats)) / steps * 1e3, 3)
                    rows.append(row)
                    print_profile_row(row, header=len(rows) == 1)
    return {"suite": "profile", "length": args.length, "single_sentences": args.single_sentences,
            "groups": [g for g, _ in OP_GROUPS] + ["other ops", "outside ops"], "rows": rows}


def print_profile_row(row: dict, *, header: bool) -> None:
    groups = ("products", "attention", "layer norm", "other ops", "outside ops")
    if header:
        print("ms per decoding step (1 thread; batch 1: one sentence) and, under the profiler, "
              "microseconds per step by group (calls)")
        print(f"{'shape':24} {'batch':>5} {'method':7} {'prec':4} {'ours ms':>8} {'CT2 ms':>7} "
              + " ".join(f"{g:>16}" for g in groups))
    us, calls = row["us_per_step"], row["calls_per_step"]
    cells = " ".join(f"{us.get(g, 0):9.0f} ({calls.get(g, 0):4.0f})" if g != "outside ops"
                     else f"{us.get(g, 0):16.0f}" for g in groups)
    ct2 = f"{row['ct2_ms_per_step']:7.3f}" if "ct2_ms_per_step" in row else f"{'-':>7}"
    print(f"{row['shape']:24} {row['batch']:5d} {row['method']:7} {row['precision']:4} "
          f"{row['ms_per_step']:8.3f} {ct2} {cells}", flush=True)


# --- the kernels suite ------------------------------------------------------------------------

KERNEL_ROWS = (1, 2, 4, 8, 16, 32, 80)


def kernels_suite(args: argparse.Namespace) -> dict:
    """Microseconds of one step's product at each row count: plain ``F.linear``, one ``addmm`` on
    the weight transposed once, oneDNN's packed
    weights and the int8 kernel, for every weight shape of the two models (the crossovers that
    ``transformer.decoding.packing`` dispatches on)."""
    from torch import nn

    from transformer.decoding import packing

    def micro(fn: Callable, x: torch.Tensor, n: int = 200) -> float:
        for _ in range(10):
            fn(x)
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            for _ in range(n):
                fn(x)
            best = min(best, (time.perf_counter() - t0) / n)
        return best * 1e6

    shapes = []
    for shape in args.shapes.values():
        d, ff = shape["d_model"], shape["d_ff"]
        shapes += [(3 * d, d), (d, d), (ff, d), (d, ff), (args.vocab, d)]
    rows = []
    for out_features, in_features in dict.fromkeys(shapes):
        layer = nn.Linear(in_features, out_features)
        kernels = {"F.linear": functools.partial(F.linear, weight=layer.weight, bias=layer.bias),
                   "addmm W^T": functools.partial(packing._transposed_linear,
                                                  layer.weight.detach().t().contiguous(), layer.bias),
                   "packed": functools.partial(packing._packed_linear,
                                               torch.ops.mkldnn._reorder_linear_weight(layer.weight.detach()),
                                               layer.bias),
                   "int8": functools.partial(packing._int8_linear, packing.int8_linear_weight(layer))}
        for r in KERNEL_ROWS:
            x = torch.randn(r, 1, in_features)
            with torch.inference_mode():
                us = {name: micro(fn, x) for name, fn in kernels.items()}
            row = {"weight": f"{out_features}x{in_features}", "rows": r,
                   "us": {k: round(v, 1) for k, v in us.items()}, "fastest": min(us, key=us.get)}
            rows.append(row)
            if len(rows) == 1:
                print(f"{'weight':>10} {'rows':>4} " + " ".join(f"{k:>9}" for k in kernels) + "  fastest")
            print(f"{row['weight']:>10} {r:4d} " + " ".join(f"{v:9.1f}" for v in us.values())
                  + f"  {row['fastest']}", flush=True)
    return {"suite": "kernels", "unit": "microseconds per call", "rows": rows,
            "attention": attention_kernels(args, micro), "argmax": argmax_kernels(args, micro)}


ATTENTION_ROWS = (4, 8, 16, 24, 32, 48, 80)
ATTENTION_KEYS = (16, 32, 64, 100)


def attention_kernels(args: argparse.Namespace, micro: Callable) -> list[dict]:
    """One query a row against L keys (a cached step's self- or cross-attention): SDPA's fused
    kernel against the spelled-out matmuls (``transformer.decoding.kernels.step_attention``'s
    ``CPU_SINGLE_QUERY_ROWS``/``_KEYS`` crossover), per head dimension of the two models."""
    from transformer.model.attention import attention

    rows = []
    heads_dims = sorted({(s["heads"], s["d_model"] // s["heads"]) for s in args.shapes.values()})
    print(f"\n{'heads x Dh':>10} {'rows':>4} {'keys':>4} {'SDPA':>9} {'spelled':>9}  fastest")
    for heads, dh in heads_dims:
        for r in ATTENTION_ROWS:
            for keys in ATTENTION_KEYS:
                q = torch.randn(r, heads, 1, dh)
                k, v = torch.randn(r, heads, keys, dh), torch.randn(r, heads, keys, dh)
                kernels = {"SDPA": lambda q, k=k, v=v: attention(q, k, v)[0],
                           "spelled": lambda q, k=k, v=v: attention(q, k, v, need_weights=True)[0]}
                with torch.inference_mode():
                    us = {name: micro(fn, q) for name, fn in kernels.items()}
                row = {"heads": heads, "head_dim": dh, "rows": r, "keys": keys,
                       "us": {n: round(t, 1) for n, t in us.items()}, "fastest": min(us, key=us.get)}
                rows.append(row)
                print(f"{f'{heads}x{dh}':>10} {r:4d} {keys:4d} {us['SDPA']:9.1f} {us['spelled']:9.1f}"
                      f"  {row['fastest']}", flush=True)
    return rows


def argmax_kernels(args: argparse.Namespace, micro: Callable) -> list[dict]:
    """The best token of R rows of V scores: PyTorch's argmax against the two rounds over chunks
    of ``transformer.decoding.common.argmax_rows`` (its ``ARGMAX_MIN_SCORES`` crossover)."""
    from transformer.decoding.common import vocabulary_chunk

    chunk = vocabulary_chunk(args.vocab)
    rows = []
    if chunk is None:
        return rows
    print(f"\n{'vocab':>10} {'rows':>4} {'argmax':>9} {'chunked':>9}  fastest")
    for r in (1, 2, 3, 4, 6, 8, 16, 80):
        scores = torch.randn(r, args.vocab)

        def chunked(s: torch.Tensor, r: int = r) -> torch.Tensor:  # argmax_rows's two rounds
            chunks = s.view(r, -1, chunk)  # (R, M, chunk)
            best = chunks.amax(dim=-1).argmax(dim=-1)
            within = chunks.gather(1, best[:, None, None].expand(r, 1, chunk)).squeeze(1).argmax(-1)
            return best * chunk + within

        kernels = {"argmax": functools.partial(torch.argmax, dim=-1), "chunked": chunked}
        with torch.inference_mode():
            us = {name: micro(fn, scores) for name, fn in kernels.items()}
        row = {"vocab": args.vocab, "rows": r, "us": {n: round(t, 1) for n, t in us.items()},
               "fastest": min(us, key=us.get)}
        rows.append(row)
        print(f"{args.vocab:>10} {r:4d} {us['argmax']:9.1f} {us['chunked']:9.1f}  {row['fastest']}",
              flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=("engines", "cache", "kernels", "profile"),
                        default="engines",
                        help="engines: ours against CTranslate2 and HF (default); cache: our "
                        "cache, packing and HF at the small preset's shape; kernels: each "
                        "product's time by rows (F.linear, packed, int8); profile: where a "
                        "step's time goes, by operator group")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run (seconds)")
    parser.add_argument("--length", type=int, default=32, help="engines: forced output length")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16], help="engines: batch sizes")
    parser.add_argument("--single-sentences", type=int, default=8,
                        help="engines: sentences decoded one at a time at batch 1")
    parser.add_argument("--lengths", type=int, nargs="+", default=[25, 50, 100], help="cache suite")
    parser.add_argument("--batch", type=int, default=16, help="cache suite")
    parser.add_argument("--src-len", type=int, default=24)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--d-model", type=int, default=256, help="cache suite")
    parser.add_argument("--heads", type=int, default=4, help="cache suite")
    parser.add_argument("--layers", type=int, default=3, help="cache suite")
    parser.add_argument("--d-ff", type=int, default=1024, help="cache suite")
    parser.add_argument("--repeats", type=int, default=5, help="repeats of the cached runs")
    parser.add_argument("--uncached-repeats", type=int, default=1,
                        help="repeats of the runs without cache (0: skip them)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--no-hf", action="store_true", help="skip Hugging Face transformers")
    parser.add_argument("--compare-thresholds", nargs="*", default=[], choices=sorted(MEASURED),
                        help="engines: also time ours with these CPU kinds' decoding crossovers "
                        "(transformer.decoding.thresholds), side by side with this machine's")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="cache suite: weights of both models (default fp32; bf16: both cast)")
    parser.add_argument("--output", type=Path, default=None,
                        help=f"default {ENGINES_RESULTS} or {RESULTS}")
    args = parser.parse_args()
    args.shapes = SHAPES
    if args.quick:
        args.lengths, args.batch, args.src_len, args.repeats = [5, 10], 4, 8, 1
        args.vocab, args.d_model, args.d_ff, args.layers = 500, 64, 128, 2
        args.length, args.batches, args.single_sentences = 6, [1, 4], 2
        args.shapes = {"d64 2+2": dict(d_model=64, heads=4, layers=2, d_ff=128)}
    if args.output is None:  # a smoke run never overwrites the real figures
        default = {"engines": ENGINES_RESULTS, "cache": RESULTS,
                   "kernels": RESULTS.with_name("decoding_kernels.json"),
                   "profile": RESULTS.with_name("decoding_profile.json")}[args.suite]
        args.output = Path(tempfile.gettempdir()) / f"{default.stem}_quick.json" if args.quick else default
    torch.set_num_threads(args.threads)
    suites = {"engines": engines_suite, "cache": cache_suite, "kernels": kernels_suite,
              "profile": profile_suite}
    result = suites[args.suite](args)
    result = {
        "benchmark": "decoding",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        **result,
        "threads": args.threads,
        "repeats": args.repeats,
        "machine": {
            "platform": platform.platform(),
            "processor": cpu_name(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": _transformers_version(),
            "hardware": describe(),
        },
        "thresholds": decoding_thresholds().to_dict(),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.output}")
    return 0


def cache_suite(args: argparse.Namespace) -> dict:
    ours, theirs = build_models(vocab=args.vocab, d_model=args.d_model, heads=args.heads,
                                layers=args.layers, d_ff=args.d_ff, hf=not args.no_hf)
    if args.precision == "bf16":
        ours.to(torch.bfloat16)
        if theirs is not None:
            theirs.to(torch.bfloat16)
    src = random_sources(batch=args.batch, src_len=args.src_len, vocab=args.vocab, seed=0)
    # warm-up: first calls allocate and pick kernels
    decoders = {pack: FastDecoder(ours, pack_weights=pack) for pack in (True, False)}
    for fn in runners(ours, theirs, src, length=3, beam=5, decoders=decoders).values():
        fn()

    rows = []
    for beam, method in ((1, "greedy"), (5, "beam 5")):
        for length in args.lengths:
            fns = runners(ours, theirs, src, length=length, beam=beam, decoders=decoders,
                          uncached=args.uncached_repeats > 0)
            best: dict[str, float] = {}
            best_cpu: dict[str, float] = {}
            for rep in range(max(args.repeats, args.uncached_repeats)):
                for name, fn in fns.items():  # interleaved: each repeat runs every variant
                    if name == "no cache" and rep >= args.uncached_repeats:
                        continue
                    if name != "no cache" and rep >= args.repeats:
                        continue
                    seconds, cpu_seconds, tokens = timed(fn)
                    best[name] = min(best.get(name, float("inf")), seconds)
                    best_cpu[name] = min(best_cpu.get(name, float("inf")), cpu_seconds)
            tps = {name: tokens / s for name, s in best.items()}
            cpu_tps = {name: tokens / s for name, s in best_cpu.items()}
            row = {
                "method": method,
                "length": length,
                "tokens": tokens,
                "tokens_per_s": {k: round(v, 1) for k, v in tps.items()},
                "tokens_per_cpu_s": {k: round(v, 1) for k, v in cpu_tps.items()},
            }
            if "unpacked" in tps:
                row["packing_speedup"] = round(tps["cache"] / tps["unpacked"], 2)
            if "no cache" in tps:
                row["cache_speedup"] = round(tps["cache"] / tps["no cache"], 2)
                row["cache_speedup_cpu"] = round(cpu_tps["cache"] / cpu_tps["no cache"], 2)
            if "HF" in tps:
                row["ours_over_hf"] = round(tps["cache"] / tps["HF"], 2)
                row["ours_over_hf_cpu"] = round(cpu_tps["cache"] / cpu_tps["HF"], 2)
            rows.append(row)
            print_row(row, header=len(rows) == 1)

    return {
        "suite": "cache",
        "model": {"vocab": args.vocab, "d_model": args.d_model, "heads": args.heads,
                  "layers": args.layers, "d_ff": args.d_ff,
                  "parameters": ours.num_parameters()},
        "precision": args.precision,
        "batch": args.batch,
        "src_len_max": args.src_len,
        "uncached_repeats": args.uncached_repeats,
        "rows": rows,
    }


def print_row(row: dict, *, header: bool) -> None:
    if header:
        print("tokens/s of wall-clock time; 'cpu' columns: the same ratios in CPU time of this process")
        print(f"{'method':8} {'length':>6} {'cache tok/s':>12} {'packed x':>9} {'no cache tok/s':>15} "
              f"{'cache x':>8} {'(cpu)':>6} {'HF tok/s':>9} {'ours/HF':>8} {'(cpu)':>6}")
    tps = row["tokens_per_s"]
    nocache = (f"{tps['no cache']:15.0f} {row['cache_speedup']:8.2f} {row['cache_speedup_cpu']:6.2f}"
               if "no cache" in tps else f"{'-':>15} {'-':>8} {'-':>6}")
    hf = (f"{tps['HF']:9.0f} {row['ours_over_hf']:8.2f} {row['ours_over_hf_cpu']:6.2f}"
          if "HF" in tps else f"{'-':>9} {'-':>8} {'-':>6}")
    packed = f"{row['packing_speedup']:9.2f}" if "packing_speedup" in row else f"{'-':>9}"
    print(f"{row['method']:8} {row['length']:6d} {tps['cache']:12.0f} {packed} {nocache} {hf}",
          flush=True)


def _transformers_version() -> str | None:
    try:
        import transformers
    except ImportError:
        return None
    return transformers.__version__


if __name__ == "__main__":
    sys.exit(main())
