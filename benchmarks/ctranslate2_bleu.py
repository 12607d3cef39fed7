"""Our translation model against its CTranslate2 export (fp32 and int8) on a real test set.

Exports the model directory with ``transformer.convert.export_ctranslate2`` (float32 and int8),
translates the test split with ours and with ``ctranslate2.Translator`` (1 thread each, batch 32,
greedy and beam 4), and prints BLEU, chrF, the share of hypotheses identical to ours, wall time and
target tokens per second. Beam search is run without a length penalty (the two engines' penalties
differ: ours is GNMT's ((5 + len) / 6)^a, CTranslate2's len^a) and with each engine's own penalty
1.0. Length limit: ours is 1.5 x source + 10 per sentence (the run's setting); CTranslate2 takes one
absolute limit per batch, the longest sentence's.

    .venv/bin/python benchmarks/ctranslate2_bleu.py --model RUN_DIR    # multi30k test_2016_flickr
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import torch

from machine import cpu_name  # benchmarks/machine.py
from transformer.convert import export_ctranslate2
from transformer.evaluation.bleu import score_translations
from transformer.evaluation.translation import load_translator, read_test_set


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--limit", type=int, help="only the first N sentences")
    parser.add_argument("--output", default=str(Path(__file__).parent / "results" / "ctranslate2_bleu.json"))
    args = parser.parse_args()
    import ctranslate2

    torch.set_num_threads(1)
    _, loaded = load_translator(args.model)
    sources, references, name = read_test_set(loaded.config.get("training", {}), split=args.split)
    if args.limit:
        sources, references = sources[: args.limit], references[: args.limit]
    tmp = Path(tempfile.mkdtemp())
    engines = {}
    for quant in ("float32", "int8"):
        export_ctranslate2(args.model, tmp / quant, quantization=None if quant == "float32" else quant)
        engines[quant] = ctranslate2.Translator(str(tmp / quant), device="cpu", intra_threads=1,
                                                inter_threads=1)
    tok = loaded.tgt_tokenizer
    rows = []
    settings = [("greedy", 1, 0.0), ("beam 4, no penalty", 4, 0.0), ("beam 4, penalty 1.0", 4, 1.0)]
    for label, beam, lp in settings:
        translator, _ = load_translator(args.model, beam_size=beam, length_penalty=lp, batch_size=32)
        translator.translate(sources[:32])  # warm-up: the first call builds the fast path
        t0 = time.perf_counter()
        ours = [t.text for t in translator.translate(sources)]
        ours_s = time.perf_counter() - t0
        ours_tokens = sum(len(tok.encode(h)) + 1 for h in ours)
        runs = [("ours fp32", ours, ours_s, ours_tokens)]
        for quant, engine in engines.items():
            t0 = time.perf_counter()
            hyps, tokens = ct2_translate(engine, loaded.src_tokenizer, sources, beam=beam,
                                         length_penalty=lp)
            runs.append((f"CTranslate2 {quant}", hyps, time.perf_counter() - t0, tokens))
        for engine_name, hyps, seconds, tokens in runs:
            scores = score_translations(hyps, references)
            rows.append({"decoding": label, "engine": engine_name, "bleu": round(scores.bleu, 2),
                         "chrf": round(scores.chrf, 2),
                         "same_as_ours": round(sum(a == b for a, b in zip(hyps, ours, strict=True)) / len(ours), 4),
                         "seconds": round(seconds, 2), "tokens_per_s": round(tokens / seconds, 1)})
            r = rows[-1]
            print(f"{label:22s} {engine_name:20s} BLEU {r['bleu']:6.2f}  chrF {r['chrf']:6.2f}  "
                  f"same {r['same_as_ours']:6.1%}  {r['seconds']:7.2f} s  {r['tokens_per_s']:8.1f} tok/s",
                  flush=True)
    out = {"model": args.model, "test_set": name, "sentences": len(sources), "threads": 1,
           "cpu": cpu_name(), "ctranslate2": ctranslate2.__version__, "rows": rows}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
