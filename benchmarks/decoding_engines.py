"""The decoding benchmark's engines and profile suites (benchmarks/decoding.py ``--suite engines``,
``--suite profile``): ours against CTranslate2 and Hugging Face on the same weights, and where a
step's time goes by operator group.

The engines suite's ``auto`` columns time the translator ``--engine auto`` builds on this machine
(our Translator or the CTranslate2 engine, wrapping included: ids to pieces and back, each
sentence's length limit), through its ``translate_ids``, at most ``--length`` tokens a sentence;
tokens per second count the tokens produced."""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from decoding_common import BOS, EOS, PAD, build_models, random_sources, timed
from transformer.decoding import FastDecoder, beam_search, greedy_decode
from transformer.decoding.thresholds import MEASURED

SHAPES = {  # name -> the model's shape (vocabulary 8000, shared and tied)
    "d256 3+3": dict(d_model=256, heads=4, layers=3, d_ff=1024),
    "d128 4+4 (multi30k-cpu)": dict(d_model=128, heads=4, layers=4, d_ff=256),
}
ENGINES = ("ours fp32", "CT2 fp32", "ours int8", "CT2 int8", "auto fp32", "auto int8", "HF fp32")
RATIOS = {"ours/CT2 fp32": ("ours fp32", "CT2 fp32"), "ours/CT2 int8": ("ours int8", "CT2 int8"),
          "auto/CT2 fp32": ("auto fp32", "CT2 fp32"), "auto/CT2 int8": ("auto int8", "CT2 int8"),
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


class _Pieces:
    """A tokenizer stand-in for the synthetic vocabulary: the engines read only pieces of ids."""

    def __init__(self, vocabulary: list[str]) -> None:
        self.vocabulary = vocabulary
        self.vocab_size = len(vocabulary)

    def id_to_piece(self, i: int) -> str:
        return self.vocabulary[i]


def auto_translators(ours, vocabulary: list[str], directory: Path) -> dict:
    """``auto fp32`` / ``auto int8`` -> the translator ``--engine auto`` builds for this model on
    this machine (``transformer.inference.engine_choice``): our Translator, or the CTranslate2
    engine over the exports ``ct2_translators`` wrote into ``directory`` (int8 where CTranslate2's
    int8 GEMM saturates: a 7-bit export, as the engine's cache holds there)."""
    from transformer.convert import save_ctranslate2
    from transformer.convert.ctranslate2 import int8_max_for_this_cpu
    from transformer.hardware import detect_cpu
    from transformer.inference.engine_choice import auto_engine
    from transformer.inference.engines import CTranslate2Translator, ctranslate2_compute_types
    from transformer.inference.translator import Translator
    from transformer.model_dir import LoadedModel, RunRecord

    tokenizer = _Pieces(vocabulary)
    out = {}
    for precision in ("fp32", "int8"):
        engine, _ = auto_engine(detect_cpu(), precision=precision, d_model=ours.config.d_model,
                                device="cpu", ctranslate2_types=ctranslate2_compute_types())
        kw = dict(bos_id=BOS, eos_id=EOS, precision=precision)
        if engine == "ctranslate2":
            path = directory / ("CT2-fp32" if precision == "fp32" else "CT2-int8")
            int8_max = int8_max_for_this_cpu()
            if precision == "int8" and int8_max != 127:
                path = save_ctranslate2(ours, directory / "CT2-int8-7bit", source_vocabulary=vocabulary,
                                        target_vocabulary=vocabulary, quantization="int8",
                                        int8_max=int8_max)
            loaded = LoadedModel(record=RunRecord.from_dict({"task": "translation", "model": ours.config.to_dict()}),
                                 src_tokenizer=tokenizer, tgt_tokenizer=tokenizer,
                                 device=torch.device("cpu"), _model=ours)
            out[f"auto {precision}"] = CTranslate2Translator(loaded, model_path=path, **kw)
        else:
            out[f"auto {precision}"] = Translator(ours, tokenizer, tokenizer, **kw)
    return out


def auto_runs(autos: dict, batches: list[torch.Tensor], *, beam: int, length: int) -> dict:
    """``auto fp32`` / ``auto int8`` -> a function decoding ``batches`` through the translator's
    own ``translate_ids`` (its wrapping included), at most ``length`` tokens a sentence (random
    weights: EOS comes rarely, and the tokens are counted as produced)."""
    from transformer.config.decoding import DecodeOptions

    fns = {}
    for name, translator in autos.items():
        translator.options = DecodeOptions(beam_size=beam, length_penalty=0.0, max_len_a=None,
                                           max_len=length)

        def run(translator=translator) -> list:
            out = []
            for src in batches:
                translator.batch_size = src.size(0)
                out += translator.translate_ids([[i for i in row if i != PAD] for row in src.tolist()])
            return out

        fns[name] = run
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
        exports = Path(tempfile.mkdtemp())
        translators = ct2_translators(ours, vocabulary, exports)
        autos = auto_translators(ours, vocabulary, exports)
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
                fns.update(auto_runs(autos, batches, beam=beam, length=args.length))
                for fn in fns.values():
                    fn()
                best: dict[str, float] = {}
                produced: dict[str, int] = {}
                for _ in range(args.repeats):
                    for name, fn in fns.items():  # interleaved: each repeat runs every engine
                        t0 = time.perf_counter()
                        hypotheses = fn()
                        seconds = time.perf_counter() - t0
                        assert name.startswith("auto") or all(len(h) == args.length for h in hypotheses), name
                        produced[name] = sum(len(h) for h in hypotheses)
                        best[name] = min(best.get(name, float("inf")), seconds)
                tokens = batch * count * args.length
                tps = {name: produced[name] / s for name, s in best.items()}
                row = {"shape": shape_name, "batch": batch, "method": method, "tokens": tokens,
                       "same_as_ct2": round(same, 3),
                       "tokens_per_s": {k: round(v, 1) for k, v in tps.items()},
                       "ms_per_token_step": {k: round(best[k] / (count * args.length) * 1e3, 3)
                                             for k in best}}
                row.update({r: round(tps[a] / tps[b], 2) for r, (a, b) in RATIOS.items()
                            if a in tps and b in tps})
                row["auto_engine"] = {k.split()[1]: autos[k].engine for k in autos}
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
