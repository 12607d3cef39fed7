"""``translate -i IN -o OUT`` on a big file: peak memory and speed, streamed in windows (this
tree's path, resumable) against translating the whole file at once: git main's ``translate``
(``--baseline-ref``; every line read, ``translate_lines`` over the whole list, one write at the
end), or that done in-process with ``--baseline-ref ''``.

Each case runs in its own child process, pinned to one core (``taskset -c 0`` when present) with
one thread; its peak RSS is the child's ``ru_maxrss``. The model is a tiny random one (d_model 32,
as the command-line tests build) over a tokenizer of English number words, and the lines are
number words (demo-like: 1 to 9999), so the figures measure the file path, not a model. Greedy
decoding, batches of 64.

    python benchmarks/translate_file.py                    # 10,000 and 1,000,000 lines
    python benchmarks/translate_file.py --lines 10000 200000

Prints a table and writes benchmarks/results/translate_file.json. Target: the streamed path's
peak RSS for the big file within 10% of its peak for 10,000 lines, and its sentences/s at least
the whole-file path's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
sys.path.insert(0, str(SRC))
sys.path.insert(0, str(HERE))

WHOLE_FILE = """
import sys
from transformer.cli.common import set_threads
from transformer.data.parallel import read_lines
from transformer.inference.lines import translate_lines
from transformer.inference.loader import load_translator
from transformer.atomic import atomic_write_bytes
set_threads(1)
model, src, out = sys.argv[1:4]
translator = load_translator(model, beam_size=1, precision="fp32", batch_size=64, engine="torch")
lines = read_lines(src)
found = translate_lines(translator, lines, src_lang="en", tgt_lang="de")
atomic_write_bytes(out, "".join(t.text + "\\n" for t in found).encode("utf-8"))
"""


def make_model(path: Path) -> None:
    import torch

    from transformer import ModelConfig, Transformer
    from transformer.data.builtin_task import english_number, german_number
    from transformer.data.tokenizer import Tokenizer
    from transformer.model_dir import save_model_dir

    texts = [english_number(n) for n in range(1, 300)] + [german_number(n) for n in range(1, 300)]
    tokenizer = Tokenizer.train(texts, vocab_size=60, byte_fallback=False)
    torch.manual_seed(0)
    model = Transformer(ModelConfig.tiny(tokenizer.vocab_size, d_model=32, d_ff=64, num_heads=4,
                                         num_encoder_layers=1, num_decoder_layers=2, dropout=0.0,
                                         max_len=48))
    config = {"training": {"decode_max_len_a": 1.0, "decode_max_len_b": 4, "src_lang": "en",
                           "tgt_lang": "de"}}
    save_model_dir(path, model, config=config, src_tokenizer=tokenizer, tgt_tokenizer=tokenizer)


def write_lines(path: Path, count: int) -> None:
    from transformer.data.builtin_task import english_number

    rng = random.Random(0)
    pool = [english_number(n) for n in range(1, 10000)]
    with path.open("w", encoding="utf-8") as f:
        for _ in range(count):
            f.write(rng.choice(pool) + "\n")


def baseline_src(ref: str, work: Path) -> Path:
    """``ref``'s src/ folder, extracted into ``work``."""
    archive = subprocess.run(["git", "-C", str(HERE.parent), "archive", ref, "src"], check=True,
                             capture_output=True).stdout
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(work)], input=archive, check=True)
    return work / "src"


def measure(argv: list[str], src: Path = SRC) -> tuple[float, float]:
    """Seconds and peak RSS (MiB) of a child process running ``argv`` with ``src`` imported."""
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    child = subprocess.Popen([*pin, *argv], env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed")
    return seconds, usage.ru_maxrss / 1024


def main() -> None:
    from machine import describe

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--out", default=str(HERE / "results" / "translate_file.json"))
    parser.add_argument("--baseline-ref", default="main",
                        help="the git revision whose translate is the whole-file path (its "
                        "src/ is extracted with git archive); '' runs translate_lines over the "
                        "whole list in-process instead")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        make_model(work / "model")
        old = baseline_src(args.baseline_ref, work / "baseline") if args.baseline_ref else SRC
        for count in args.lines:
            src = work / f"in-{count}.txt"
            write_lines(src, count)
            streamed, whole = work / f"streamed-{count}.txt", work / f"whole-{count}.txt"
            flags = ["--beam", "1", "--precision", "fp32", "--threads", "1", "--batch-size", "64",
                     "--engine", "torch", "--no-progress"]
            cli = [sys.executable, "-m", "transformer", "translate", "--model", str(work / "model"),
                   "-i", str(src)]
            cases = {
                "streamed": ([*cli, "-o", str(streamed), *flags], SRC),
                "whole file": (([*cli, "-o", str(whole), *flags], old) if args.baseline_ref else
                               ([sys.executable, "-c", WHOLE_FILE, str(work / "model"), str(src),
                                 str(whole)], SRC)),
            }
            for name, (argv, tree) in cases.items():
                seconds, peak = measure(argv, tree)
                rows.append({"path": name, "lines": count, "seconds": round(seconds, 2),
                             "sentences_per_s": round(count / seconds, 1),
                             "peak_rss_mib": round(peak, 1)})
                print(f"{name:>10} {count:>9,} lines {seconds:8.1f} s "
                      f"{count / seconds:9.1f} sent/s  peak RSS {peak:8.1f} MiB", flush=True)
            rows[-1]["same_output"] = streamed.read_bytes() == whole.read_bytes()
    small = min(args.lines)
    big = max(args.lines)
    by = {(r["path"], r["lines"]): r for r in rows}
    summary = {
        "streamed_peak_growth": round(by["streamed", big]["peak_rss_mib"]
                                      / by["streamed", small]["peak_rss_mib"] - 1, 4),
        "whole_file_peak_growth": round(by["whole file", big]["peak_rss_mib"]
                                        / by["whole file", small]["peak_rss_mib"] - 1, 4),
        "speed_ratio_streamed_over_whole_file": round(by["streamed", big]["sentences_per_s"]
                                                      / by["whole file", big]["sentences_per_s"], 3),
    }
    print(f"\n{'path':>10} | {'lines':>9} | {'sent/s':>9} | {'peak RSS MiB':>12}")
    for r in rows:
        print(f"{r['path']:>10} | {r['lines']:>9,} | {r['sentences_per_s']:>9.1f} | "
              f"{r['peak_rss_mib']:>12.1f}")
    print(json.dumps(summary))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rows": rows, "summary": summary,
                                          "command": " ".join(sys.argv),
                                          "whole_file_path": args.baseline_ref or "in-process",
                                          "machine": describe()}, indent=2) + "\n")


if __name__ == "__main__":
    main()
