"""Our translation model against its CTranslate2 export (fp32 and int8) on a real test set.

Exports the model directory with ``transformer.convert.export_ctranslate2`` (float32 and int8),
translates the test split with ours and with ``ctranslate2.Translator`` (1 thread each, batch 32,
greedy and beam 4), and prints BLEU, chrF, the share of hypotheses identical to ours, wall time and
target tokens per second. Beam search is run without a length penalty (the two engines' penalties
differ: ours is GNMT's ((5 + len) / 6)^a, CTranslate2's len^a) and with each engine's own penalty
1.0. Length limit: ours is 1.5 x source + 10 per sentence (the run's setting); CTranslate2 takes one
absolute limit per batch, the longest sentence's. The ISA and the GEMM backends CTranslate2 uses
here (its own report, CT2_VERBOSE) are printed and recorded beside the scores: int8 BLEU depends on
them (oneDNN's int8 GEMM without VNNI saturates on CTranslate2's own int8 weights; CT2_USE_MKL=1
avoids it, and so do 7-bit weights, the "int8 7-bit" export: ``int8_max=63``).

    .venv/bin/python benchmarks/ctranslate2_bleu.py --model RUN_DIR    # multi30k test_2016_flickr
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from machine import cpu_name, describe, require_model  # benchmarks/machine.py
from transformer.convert import export_ctranslate2
from transformer.convert.ctranslate2 import onednn_int8_saturates
from transformer.evaluation.bleu import score_translations
from transformer.inference.loader import load_translator
from transformer.inference.translation_eval import read_test_set
from transformer.model_dir import load_model_dir


def ct2_translate(translator, tokenizer, sources: list[str], *, beam: int, length_penalty: float,
                  batch: int = 32) -> tuple[list[str], int]:
    hypotheses, tokens = [], 0
    for start in range(0, len(sources), batch):
        chunk = [tokenizer.encode(s) for s in sources[start:start + batch]]
        pieces = [[tokenizer.id_to_piece(i) for i in ids] for ids in chunk]
        limit = max(math.ceil(1.5 * len(ids) + 10) for ids in chunk)
        results = translator.translate_batch(pieces, beam_size=beam, length_penalty=length_penalty,
                                             max_decoding_length=limit, max_batch_size=batch)
        for r in results:
            ids = [tokenizer.piece_to_id(p) for p in r.hypotheses[0]]
            tokens += len(ids) + 1
            hypotheses.append(tokenizer.decode(ids))
    return hypotheses, tokens


def ct2_backends(model_dir: Path) -> dict[str, object]:
    """What CTranslate2 reports (CT2_VERBOSE=1) on loading ``model_dir`` in a fresh process with
    this environment: its ISA and its float32 and int8 GEMM backends; and whether that int8 GEMM
    is oneDNN's without VNNI, which saturates (``onednn_int8_saturates``)."""
    code = "import sys, ctranslate2; ctranslate2.Translator(sys.argv[1], device='cpu')"
    log = subprocess.run([sys.executable, "-c", code, str(model_dir)], capture_output=True,
                         text=True, env={**os.environ, "CT2_VERBOSE": "1"}).stderr

    def reported(field: str) -> str:
        found = re.search(rf"{field}: (\w+)", log)
        return {"DNNL": "oneDNN"}.get(found.group(1), found.group(1)) if found else "unknown"

    return {"isa": reported("Selected ISA"), "float32_gemm": reported("SGEMM backend"),
            "int8_gemm": reported("GEMM_S8 backend"), "int8_saturates": onednn_int8_saturates(),
            "environment": {k: os.environ[k] for k in ("CT2_USE_MKL", "CT2_FORCE_CPU_ISA",
                                                         "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
                            if k in os.environ}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a translation model directory "
                        "(benchmarks/quality.py makes runs/quality/en-de)")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--limit", type=int, help="only the first N sentences")
    parser.add_argument("--output", default=str(Path(__file__).parent / "results" / "ctranslate2_bleu.json"))
    args = parser.parse_args()
    require_model(args.model, script="benchmarks/ctranslate2_bleu.py")
    import ctranslate2

    torch.set_num_threads(1)
    loaded = load_model_dir(args.model)
    sources, references, name = read_test_set(loaded.record, split=args.split)
    if args.limit:
        sources, references = sources[: args.limit], references[: args.limit]
    tmp = Path(tempfile.mkdtemp())
    engines = {}
    for quant, quantization, int8_max in (("float32", None, 127), ("int8", "int8", 127),
                                          ("int8 7-bit", "int8", 63)):
        out_dir = tmp / quant.replace(" ", "-")
        export_ctranslate2(args.model, out_dir, quantization=quantization, int8_max=int8_max)
        engines[quant] = ctranslate2.Translator(str(out_dir), device="cpu", intra_threads=1,
                                                inter_threads=1)
    backends = ct2_backends(tmp / "int8")
    print(f"CTranslate2 {ctranslate2.__version__}: ISA {backends['isa']}, float32 GEMM "
          f"{backends['float32_gemm']}, int8 GEMM {backends['int8_gemm']}"
          + (" (saturates without VNNI: CT2_USE_MKL=1 avoids it)" if backends["int8_saturates"]
             else ""), flush=True)
    int8_gemm = backends["int8_gemm"] + (" no VNNI" if backends["int8_saturates"] else "")
    gemm = {"float32": backends["float32_gemm"], "int8": int8_gemm, "int8 7-bit": int8_gemm}
    tok = loaded.tgt_tokenizer
    rows = []
    settings = [("greedy", 1, 0.0), ("beam 4, no penalty", 4, 0.0), ("beam 4, penalty 1.0", 4, 1.0)]
    for label, beam, lp in settings:
        translator = load_translator(args.model, beam_size=beam, length_penalty=lp, batch_size=32)
        translator.translate(sources[:32])  # warm-up: the first call builds the fast path
        t0 = time.perf_counter()
        ours = [t.text for t in translator.translate(sources)]
        ours_s = time.perf_counter() - t0
        ours_tokens = sum(len(tok.encode(h)) + 1 for h in ours)
        runs = [("ours fp32", ours, ours_s, ours_tokens, "PyTorch")]
        for quant, engine in engines.items():
            t0 = time.perf_counter()
            hyps, tokens = ct2_translate(engine, loaded.src_tokenizer, sources, beam=beam,
                                         length_penalty=lp)
            runs.append((f"CTranslate2 {quant}", hyps, time.perf_counter() - t0, tokens,
                         f"{backends['isa']} {gemm[quant]}"))
        for engine_name, hyps, seconds, tokens, backend in runs:
            scores = score_translations(hyps, references)
            rows.append({"decoding": label, "engine": engine_name, "backend": backend,
                         "bleu": round(scores.bleu, 2),
                         "chrf": round(scores.chrf, 2),
                         "same_as_ours": round(sum(a == b for a, b in zip(hyps, ours, strict=True)) / len(ours), 4),
                         "seconds": round(seconds, 2), "tokens_per_s": round(tokens / seconds, 1)})
            r = rows[-1]
            print(f"{label:22s} {engine_name:20s} {backend:19s} BLEU {r['bleu']:6.2f}  "
                  f"chrF {r['chrf']:6.2f}  "
                  f"same {r['same_as_ours']:6.1%}  {r['seconds']:7.2f} s  {r['tokens_per_s']:8.1f} tok/s",
                  flush=True)
    out = {"model": args.model, "test_set": name, "sentences": len(sources), "threads": 1,
           "cpu": cpu_name(), "hardware": describe(), "ctranslate2": ctranslate2.__version__, "ctranslate2_cpu": backends,
           "rows": rows}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
