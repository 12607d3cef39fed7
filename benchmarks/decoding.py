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

``--suite compiled``: the engines suite's models, batches and searches, the cached decoder step
compiled ahead of time by PyTorch's compiler (AOTInductor, static shapes, cached on disk under
``--compiled-cache``: ``decoding_compiled.py``) against ours eager and CTranslate2 float32, with
each bucket's compile time and package size. With ``--model RUN_DIR``: instead, parity on the
run's test_2016_flickr output (float32 greedy, compiled step against eager, line for line).

``--suite e2e --model RUN_DIR``: ``transformer translate -i`` of Multi30k's test_2016_flickr, each
engine as one whole command, against a CTranslate2 script on the model's export
(``decoding_e2e.py``).

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
- greedy rows also time, with the cache: ``greedy+scores`` (``greedy_decode(hypotheses=True)``,
  the model's log-probability of each output kept, as a ``Translator`` asks for it),
  ``sampling`` (``sample_decode``, drawn from the whole vocabulary) and ``sampling top-k 10``;
  ``sampling / greedy`` is the first's tokens/s over greedy decoding's.

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

This script holds the command line and the cache suite; the other suites live beside it, in
``decoding_engines.py`` (engines, profile) and ``decoding_kernels.py``, and the models and sources
they share in ``decoding_common.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from decoding_common import BOS, EOS, PAD, build_models, random_sources, timed
from decoding_compiled import compiled_parity, compiled_suite
from decoding_e2e import e2e_suite
from decoding_engines import SHAPES, engines_suite, profile_suite
from decoding_kernels import kernels_suite
from machine import cpu_name, describe  # benchmarks/machine.py
from transformer.decoding import FastDecoder, beam_search, greedy_decode, sample_decode
from transformer.decoding.packing import can_pack
from transformer.decoding.thresholds import MEASURED, decoding_thresholds

RESULTS = Path(__file__).resolve().parent / "results" / "decoding.json"
ENGINES_RESULTS = RESULTS.with_name("decoding_engines.json")


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
    if beam == 1:
        fns.update(steered(ours, src, kw, decoders[True], length=length))
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


def steered(ours, src: torch.Tensor, kw: dict, decoder: FastDecoder, *, length: int) -> dict[str, Callable[[], int]]:
    """Greedy decoding that keeps log-probabilities, and sampling (whole vocabulary; top-k 10),
    each with the cache and ``decoder``, at the forced ``length``."""
    def run(how: Callable[[], list]) -> Callable[[], int]:
        def timed_run() -> int:
            out = how()
            assert all(len(ids) == length for ids in out), "output length not forced"
            return sum(len(ids) for ids in out)

        return timed_run

    def scored() -> list:
        return [h.ids for h in greedy_decode(ours, src, decoder=decoder, hypotheses=True, **kw)]

    def sampled(**cut) -> Callable[[], list]:
        return lambda: [row[0].ids for row in sample_decode(ours, src, seed=0, decoder=decoder, **cut, **kw)]

    return {"greedy+scores": run(scored), "sampling": run(sampled()),
            "sampling top-k 10": run(sampled(top_k=10))}


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
            if "sampling" in tps:
                row["sampling_over_greedy"] = round(tps["sampling"] / tps["cache"], 3)
                row["scores_over_greedy"] = round(tps["greedy+scores"] / tps["cache"], 3)
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
    if "sampling" in tps:
        print(f"{'':15} greedy+scores {tps['greedy+scores']:.0f} tok/s "
              f"({row['scores_over_greedy']:.3f} x greedy), sampling {tps['sampling']:.0f} "
              f"({row['sampling_over_greedy']:.3f} x), sampling top-k 10 "
              f"{tps['sampling top-k 10']:.0f}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=("engines", "cache", "kernels", "profile", "compiled", "e2e"),
                        default="engines",
                        help="engines: ours against CTranslate2 and HF (default); cache: our "
                        "cache, packing and HF at the small preset's shape; kernels: each "
                        "product's time by rows (F.linear, packed, int8); profile: where a "
                        "step's time goes, by operator group; compiled: the decoder step "
                        "compiled by AOTInductor against ours eager and CT2; e2e: "
                        "`transformer translate -i` of test_2016_flickr per engine (--model)")
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
    parser.add_argument("--model", type=Path, help="e2e, compiled: the translation model directory")
    parser.add_argument("--src", default="en", help="e2e: the source language of the test set")
    parser.add_argument("--input", type=Path, default=None,
                        help="e2e: the file to translate (default: Multi30k's test_2016_flickr in --src)")
    parser.add_argument("--lines", type=int, default=None,
                        help="e2e: translate this many lines (the file repeated and cut; default: the file)")
    parser.add_argument("--with-torch", action="store_true",
                        help="e2e: also time --engine torch (slow at thousands of lines)")
    parser.add_argument("--compiled-cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "transformer-compiled-steps",
                        help="compiled: where compiled steps are kept between runs")
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
                   "profile": RESULTS.with_name("decoding_profile.json"),
                   "compiled": RESULTS.with_name("decoding_compiled.json" if args.model is None
                                                 else "decoding_compiled_parity.json"),
                   "e2e": RESULTS.with_name("decoding_e2e.json")}[args.suite]
        args.output = Path(tempfile.gettempdir()) / f"{default.stem}_quick.json" if args.quick else default
    torch.set_num_threads(args.threads)
    suites = {"engines": engines_suite, "cache": cache_suite, "kernels": kernels_suite,
              "profile": profile_suite, "compiled": compiled_suite, "e2e": e2e_suite}
    if args.suite == "compiled" and args.model is not None:
        suites["compiled"] = compiled_parity
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


def _transformers_version() -> str | None:
    try:
        import transformers
    except ImportError:
        return None
    return transformers.__version__


if __name__ == "__main__":
    sys.exit(main())
