"""The decoding benchmark's end-to-end suite (benchmarks/decoding.py ``--suite e2e --model RUN_DIR``):
``transformer translate -i`` of Multi30k's test_2016_flickr as a user runs it, one whole command
per engine, against CTranslate2 itself on the model ``transformer export ctranslate2`` wrote
(``--input FILE``: another file).

Each command is a fresh process on 1 thread (``--threads 1``; pin the benchmark with ``taskset``),
timed from start to exit: ``--engine ctranslate2`` (its conversion made once before timing, as a
second call finds it) and ``--engine auto``, each line translated whole (``--no-split``), ``auto``
again with the default sentence splitting (its cost: the difference), and with ``--with-torch``
``--engine torch``, in float32 and int8, greedy and beam 4 (the paper's search, length penalty
0.6), beside a script of a dozen lines that does what a CTranslate2 user does, with SentencePiece
and CTranslate2 alone (no PyTorch, none of our package): tokenize with the run's SentencePiece
model, ``translate_batch`` (batch 64, the same length limit, 1.5 x source + 10 capped by the
model's positions, as one absolute limit per call, the longest sentence's), detokenize, write.
``--lines N``: the file repeated and cut to N lines. Also reported: the share of lines ours on
CTranslate2 translates as the script does. Commands alternate within each repeat; the
fastest repeat of each counts. Reported: seconds, and each command's speed over CTranslate2's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# what a CTranslate2 user writes: SentencePiece and CTranslate2 alone (neither PyTorch nor our package,
# whose start-up would be counted against the script otherwise); lines read as ours reads them
# (stripped), the run's own SentencePiece model(s) named by its tokenizer.json
CT2_SCRIPT = """
import gzip, json, sys
import ctranslate2, sentencepiece
run, model, source, out, beam, quantization = sys.argv[1:7]
info = json.load(open(run + "/tokenizer/tokenizer.json"))
src = sentencepiece.SentencePieceProcessor(model_file=run + "/tokenizer/" + info["src"])
tgt = sentencepiece.SentencePieceProcessor(model_file=run + "/tokenizer/" + info["tgt"])
with (gzip.open if source.endswith(".gz") else open)(source, "rt", encoding="utf-8") as f:
    lines = [line.strip() for line in f]
pieces = src.encode(lines, out_type=str)
positions = json.load(open(run + "/config.json"))["model"]["max_len"]
limit = min(max(int(1.5 * len(row) + 10) for row in pieces), positions)
translator = ctranslate2.Translator(model, device="cpu", intra_threads=1, inter_threads=1,
                                    compute_type="int8" if quantization == "int8" else "float32")
results = translator.translate_batch(pieces, max_batch_size=64, beam_size=int(beam),
                                     length_penalty=0.6 if int(beam) > 1 else 0.0,
                                     max_decoding_length=limit)
with open(out, "w", encoding="utf-8") as f:
    for r in results:
        f.write(tgt.decode(r.hypotheses[0]) + "\\n")
"""


NAMES = ("ours torch", "ours ctranslate2", "ours auto", "ours auto split", "CT2 script")


def _commands(run: Path, source: Path, work: Path, *, precision: str, beam: int,
              with_torch: bool) -> dict[str, list[str]]:
    """Each command, writing ``work/<name>.txt``: ours on each engine translating each line whole
    (``--no-split``, as the script does), ours with its sentence splitting (the default), and the
    script."""
    def out(name: str) -> str:
        return str(work / f"{name.replace(' ', '-')}.txt")

    ours = [sys.executable, "-m", "transformer", "translate", "--model", str(run), "-i", str(source),
            "--threads", "1", "--no-progress", "--precision", precision, "--beam", str(beam)]
    engines = ("torch", "ctranslate2", "auto") if with_torch else ("ctranslate2", "auto")
    export = work / f"ct2-{precision}"
    return {f"ours {engine}": [*ours, "--engine", engine, "--no-split", "-o", out(f"ours {engine}")]
            for engine in engines} | {
        "ours auto split": [*ours, "--engine", "auto", "-o", out("ours auto split")],
        "CT2 script": [sys.executable, "-c", CT2_SCRIPT, str(run), str(export), str(source),
                       out("CT2 script"), str(beam), precision]}


def _run(command: list[str]) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode written by the first run, as a user's is
    began = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:6])} ... failed:\n{done.stderr[-2000:]}")
    return seconds


def _source(args: argparse.Namespace, work: Path) -> Path:
    """The file to translate: ``--input`` or the test set, repeated and cut to ``--lines``."""
    from decoding_common import test_set_file
    from transformer.data.parallel import read_lines

    source = args.input or test_set_file(args.src)
    if args.lines is None:
        return source
    lines = read_lines(source)
    lines = (lines * (args.lines // len(lines) + 1))[: args.lines]
    path = work / f"source-{args.lines}.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _same(work: Path, a: str, b: str) -> float:
    """The share of lines two commands translated alike."""
    first, second = ((work / f"{name.replace(' ', '-')}.txt").read_text(encoding="utf-8").splitlines()
                     for name in (a, b))
    return round(sum(x == y for x, y in zip(first, second, strict=True)) / max(len(first), 1), 4)


def e2e_suite(args: argparse.Namespace) -> dict:
    from machine import require_model
    from transformer.convert import export_ctranslate2
    from transformer.convert.ctranslate2 import int8_max_for_this_cpu

    if args.model is None:
        raise SystemExit("--suite e2e needs --model RUN_DIR (a translation model directory)")
    require_model(args.model, script="benchmarks/decoding.py --suite e2e")
    work = Path(tempfile.mkdtemp())
    source = _source(args, work)
    rows = []
    for precision in ("fp32", "int8"):
        # int8: the weights ours converts to on this CPU (7-bit where CTranslate2's int8 saturates)
        export_ctranslate2(args.model, work / f"ct2-{precision}",
                           quantization="int8" if precision == "int8" else None,
                           int8_max=int8_max_for_this_cpu() if precision == "int8" else 127)
        for beam in (1, 4):
            commands = _commands(args.model, source, work, precision=precision, beam=beam,
                                 with_torch=args.with_torch)
            _run(commands["ours ctranslate2"])  # the engine's conversion, made once
            best: dict[str, float] = {}
            for _ in range(args.repeats):
                for name, command in commands.items():  # alternating within a repeat
                    best[name] = min(best.get(name, float("inf")), _run(command))
            row = {"precision": precision, "beam": beam, "seconds": {k: round(v, 2) for k, v in best.items()},
                   **{f"{k}/CT2": round(best["CT2 script"] / v, 2) for k, v in best.items() if k != "CT2 script"},
                   "splitter_s": round(best["ours auto split"] - best["ours auto"], 2),
                   "same_as_CT2": _same(work, "ours ctranslate2", "CT2 script")}
            rows.append(row)
            print_e2e_row(row, header=len(rows) == 1)
    return {"suite": "e2e", "model": str(args.model), "source": str(args.input or source),
            "lines": len(source.read_text(encoding="utf-8").splitlines()) if args.lines else None,
            "rows": rows}


def print_e2e_row(row: dict, *, header: bool) -> None:
    names = [n for n in NAMES if n in row["seconds"]]
    if header:
        print("seconds for the whole command (1 thread); x: CT2 script's time / the command's; "
              "ours translate each line whole (--no-split) but 'split' (the default)")
        print(f"{'precision':9} {'beam':>4} " + " ".join(f"{n:>16}" for n in names)
              + " " + " ".join(f"{n + ' x':>18}" for n in names[:-1]) + f" {'splitter s':>10} {'same':>6}")
    seconds = row["seconds"]
    print(f"{row['precision']:9} {row['beam']:4d} " + " ".join(f"{seconds[n]:16.2f}" for n in names)
          + " " + " ".join(f"{row[n + '/CT2']:18.2f}" for n in names[:-1])
          + f" {row['splitter_s']:10.2f} {row['same_as_CT2']:6.3f}", flush=True)
