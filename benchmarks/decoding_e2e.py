"""The decoding benchmark's end-to-end suite (benchmarks/decoding.py ``--suite e2e --model RUN_DIR``):
``transformer translate -i`` of Multi30k's test_2016_flickr as a user runs it, one whole command
per engine, against CTranslate2 itself on the model ``transformer export ctranslate2`` wrote
(``--input FILE``: another file).

Each command is a fresh process on 1 thread (``--threads 1``; pin the benchmark with ``taskset``),
timed from start to exit: ``--engine torch``, ``--engine ctranslate2`` (its conversion made once
before timing, as a second call finds it) and ``--engine auto``, in float32 and int8, greedy and
beam 4 (the paper's search, length penalty 0.6), beside a script of a dozen lines that does what a
CTranslate2 user does: tokenize with the run's SentencePiece model, ``translate_batch`` (batch 64,
the same length limit, 1.5 x source + 10 capped by the model's positions, as one absolute limit per
call, the longest sentence's), detokenize, write. Commands alternate within each repeat; the
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

CT2_SCRIPT = """
import sys, ctranslate2
from transformer.data.parallel import read_lines
from transformer.data.tokenizer_pair import load_tokenizers
run, model, source, out, beam, quantization = sys.argv[1:7]
src_tok, tgt_tok = load_tokenizers(run)
lines = list(read_lines(source))
ids = [src_tok.encode(line) for line in lines]
pieces = [[src_tok.id_to_piece(i) for i in row] for row in ids]
limit = max(int(1.5 * len(row) + 10) for row in ids)
translator = ctranslate2.Translator(model, device="cpu", intra_threads=1, inter_threads=1,
                                    compute_type="int8" if quantization == "int8" else "float32")
results = translator.translate_batch(pieces, max_batch_size=64, beam_size=int(beam),
                                     length_penalty=0.6 if int(beam) > 1 else 0.0,
                                     max_decoding_length=limit)
with open(out, "w", encoding="utf-8") as f:
    for r in results:
        f.write(tgt_tok.decode([tgt_tok.piece_to_id(p) for p in r.hypotheses[0]]) + "\\n")
"""


def _commands(run: Path, source: Path, work: Path, *, precision: str, beam: int) -> dict[str, list[str]]:
    out = str(work / "out.txt")
    ours = [sys.executable, "-m", "transformer", "translate", "--model", str(run), "-i", str(source),
            "-o", out, "--threads", "1", "--no-progress", "--precision", precision, "--beam", str(beam)]
    export = work / f"ct2-{precision}"
    return {f"ours {engine}": [*ours, "--engine", engine] for engine in ("torch", "ctranslate2", "auto")} | {
        "CT2 script": [sys.executable, "-c", CT2_SCRIPT, str(run), str(export), str(source), out,
                       str(beam), precision]}


def _run(command: list[str]) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    began = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:6])} ... failed:\n{done.stderr[-2000:]}")
    return seconds


def e2e_suite(args: argparse.Namespace) -> dict:
    from decoding_common import test_set_file
    from machine import require_model
    from transformer.convert import export_ctranslate2

    if args.model is None:
        raise SystemExit("--suite e2e needs --model RUN_DIR (a translation model directory)")
    require_model(args.model, script="benchmarks/decoding.py --suite e2e")
    source = args.input or test_set_file(args.src)
    work = Path(tempfile.mkdtemp())
    rows = []
    for precision in ("fp32", "int8"):
        export_ctranslate2(args.model, work / f"ct2-{precision}",
                           quantization="int8" if precision == "int8" else None)
        for beam in (1, 4):
            commands = _commands(args.model, source, work, precision=precision, beam=beam)
            _run(commands["ours ctranslate2"])  # the engine's conversion, made once
            best: dict[str, float] = {}
            for _ in range(args.repeats):
                for name, command in commands.items():  # alternating within a repeat
                    best[name] = min(best.get(name, float("inf")), _run(command))
            row = {"precision": precision, "beam": beam, "seconds": {k: round(v, 2) for k, v in best.items()},
                   **{f"{k}/CT2": round(best["CT2 script"] / v, 2) for k, v in best.items() if k != "CT2 script"}}
            rows.append(row)
            print_e2e_row(row, header=len(rows) == 1)
    return {"suite": "e2e", "model": str(args.model), "source": str(source), "rows": rows}


def print_e2e_row(row: dict, *, header: bool) -> None:
    names = ("ours torch", "ours ctranslate2", "ours auto", "CT2 script")
    if header:
        print("seconds for the whole command (1 thread); x: CT2 script's time / the command's")
        print(f"{'precision':9} {'beam':>4} " + " ".join(f"{n:>16}" for n in names)
              + " " + " ".join(f"{n + ' x':>18}" for n in names[:3]))
    seconds = row["seconds"]
    print(f"{row['precision']:9} {row['beam']:4d} " + " ".join(f"{seconds[n]:16.2f}" for n in names)
          + " " + " ".join(f"{row[n + '/CT2']:18.2f}" for n in names[:3]), flush=True)
