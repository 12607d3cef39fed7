"""Streamed translation: how soon a long paragraph's first sentence arrives, and what streaming
costs the whole answer.

One paragraph of ``--sentences`` sentences (number words for a model of the built-in number
task, the default; ``--text-file``: one sentence a line of your own) is translated by the
translator ``--engine auto`` builds, beam ``--beam``, one thread: unstreamed (one
``translate_lines`` call) and streamed (``stream_translation``: the first sentence alone, then
the rest), alternately, ``--repeats`` times each. Reported, as medians: the unstreamed time, the
streamed first event and whole answer, and the issue's two ratios (first event / whole streamed
answer at most 0.25; streamed / unstreamed at most 1.1); and whether the streamed texts equal the
unstreamed ones.

    transformer demo --out runs/demo                     # d_model 64: auto decodes with ours
    taskset -c 1 .venv/bin/python benchmarks/stream.py --model runs/demo

Prints a table and writes benchmarks/results/stream.json with the machine. The machine may be
shared: quote the ratios.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch

from machine import describe, require_model  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parents[1]
DEMO = "transformer demo --out {path}  # a few minutes on one core"


def number_sentences(count: int, seed: int) -> list[str]:
    """``count`` number-word sentences of the built-in task (1 to 9999), capitalised, with a full stop."""
    from transformer.data.builtin_task import english_number

    rng = random.Random(seed)
    return [english_number(rng.randint(1, 9999)).capitalize() + "." for _ in range(count)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="runs/demo")
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--text-file", type=Path, help="one sentence a line (default: number words)")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--engine", default="auto")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "stream.json")
    args = parser.parse_args(argv)
    require_model(args.model, script="stream.py", make=DEMO)
    torch.set_num_threads(args.threads)

    from transformer.inference.lines import translate_lines
    from transformer.inference.loader import load_translator
    from transformer.inference.streaming import SentenceDone, TokenDone, stream_translation

    translator = load_translator(args.model, engine=args.engine, precision=args.precision)
    options = translator.record.decode_options(beam_size=args.beam)
    src, tgt = translator.record.languages
    if args.text_file:
        sentences = [s.strip() for s in args.text_file.read_text(encoding="utf-8").splitlines() if s.strip()]
        sentences = sentences[: args.sentences]
    else:
        sentences = number_sentences(args.sentences, args.seed)
    paragraph = " ".join(sentences)
    how = dict(src_lang=src, tgt_lang=tgt, options=options)

    def unstreamed() -> tuple[float, str]:
        start = time.perf_counter()
        (line,) = translate_lines(translator, [paragraph], **how)
        return time.perf_counter() - start, line.text

    def streamed() -> tuple[float, float, int, str]:
        start = time.perf_counter()
        first, count = None, 0
        for event in stream_translation(translator, [paragraph], **how):
            if isinstance(event, (TokenDone, SentenceDone)):  # a token's: one sentence, greedy
                count += isinstance(event, SentenceDone)
                first = first if first is not None else time.perf_counter() - start
            else:
                text = event.translations[0].text
        return first, time.perf_counter() - start, count, text

    unstreamed(), streamed()  # warm: the engine's conversion, caches, allocations
    plain, firsts, wholes, same = [], [], [], True
    for _ in range(args.repeats):
        seconds, want = unstreamed()
        first, whole, count, got = streamed()
        plain.append(seconds)
        firsts.append(first)
        wholes.append(whole)
        same &= got == want
    row = {"engine": translator.engine, "precision": translator.precision, "beam": args.beam,
           "sentences": count, "unstreamed_s": statistics.median(plain),
           "first_event_s": statistics.median(firsts), "streamed_s": statistics.median(wholes),
           "same_text": same}
    row["first_over_streamed"] = row["first_event_s"] / row["streamed_s"]
    row["streamed_over_unstreamed"] = row["streamed_s"] / row["unstreamed_s"]
    row["first_ok"] = row["first_over_streamed"] <= 0.25
    row["total_ok"] = row["streamed_over_unstreamed"] <= 1.1

    print(f"{'engine':<12} {'sentences':>9} {'unstreamed ms':>13} {'first ms':>9} {'streamed ms':>11} "
          f"{'first/whole':>11} {'streamed/unstreamed':>19} {'same text':>9}")
    print(f"{row['engine']:<12} {row['sentences']:>9} {row['unstreamed_s'] * 1000:>13.1f} "
          f"{row['first_event_s'] * 1000:>9.1f} {row['streamed_s'] * 1000:>11.1f} "
          f"{row['first_over_streamed']:>11.2f} {row['streamed_over_unstreamed']:>19.2f} {str(same):>9}")
    out = {"machine": describe(), "command": " ".join(["benchmarks/stream.py", *sys.argv[1:]]),
           "model": str(args.model), "threads": args.threads, "repeats": args.repeats, "result": row}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0 if row["first_ok"] and row["total_ok"] and same else 1


if __name__ == "__main__":
    sys.exit(main())
