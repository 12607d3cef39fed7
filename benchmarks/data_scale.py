"""Data at scale: `transformer prepare` and `transformer train --data-dir` on synthetic parallel
corpora of growing size (issue 35).

For each size (pairs) it writes a synthetic English-German corpus with a WMT-like length
distribution (sentence lengths lognormal around 20 words with a long tail, target lengths near the
source's; words drawn with Multi30k's own word frequencies; each line ends with its number, so no
two pairs are equal), then measures, each as a child process:

- prepare: wall time and peak memory (the largest process, from wait4, and the sum over the
  process tree sampled every 0.1 s: the encoding workers included);
- train from the prepared directory: seconds from the command to its first update, peak RSS, and
  that peak beyond the same model and optimizer trained from a tiny prepared directory (what the
  data costs); training tokens/s over the updates after the first, beside the same model trained
  in memory on Multi30k's text files and from Multi30k prepared (the same batches both ways, in
  alternating rounds, the best round of each);
- resume: seconds from `train --resume` to its first new update, and its peak RSS;
- DDP: two gloo ranks on this machine against one process: the RSS (and PSS, which counts shared
  pages once) the extra rank adds, and that less what an extra rank adds on a 2,000-pair
  directory (a rank's own model, optimizer, activations and runtime): the data's share.

"setup s" is the time to the first update less that update's own compute: what reading the data
and building the run took.

    .venv/bin/python benchmarks/data_scale.py --sizes 100000
    .venv/bin/python benchmarks/data_scale.py                  # 100000 1000000 4500000

Prints a table and writes benchmarks/results/data_scale.json (with the machine). The corpora are
kept in --work (default /tmp/data_scale) and reused by later runs. How a child process is timed and
its memory sampled: benchmarks/process_memory.py.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from machine import describe  # benchmarks/machine.py
from process_memory import TreeMemory, process_tree, run_timed, setup_s

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


# ------------------------------------------------------------------------------------ corpora


def _word_table(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        counts = Counter(w for line in f for w in line.split())
    words = np.array(list(counts), dtype=object)
    freq = np.array([counts[w] for w in words], dtype=np.float64)
    return words, freq / freq.sum()


def write_corpus(folder: Path, pairs: int, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/train.en`` and ``train.de`` of ``pairs`` synthetic lines (kept when present)."""
    src, tgt = folder / "train.en", folder / "train.de"
    if src.is_file() and tgt.is_file() and (folder / "done").is_file():
        return src, tgt
    folder.mkdir(parents=True, exist_ok=True)
    m30k = data_root() / "multi30k"
    en_words, en_p = _word_table(m30k / "train.en.gz")
    de_words, de_p = _word_table(m30k / "train.de.gz")
    rng = np.random.default_rng(seed)
    with open(src, "w", encoding="utf-8") as fs, open(tgt, "w", encoding="utf-8") as ft:
        for start in range(0, pairs, 100_000):
            n = min(100_000, pairs - start)
            # WMT14 en-de: a median near 20 words, a mean near 24, a tail past 100
            s_len = np.clip(np.round(rng.lognormal(np.log(20), 0.6, n)), 1, 200).astype(int)
            t_len = np.clip(np.round(s_len * 0.95 * rng.lognormal(0, 0.15, n)), 1, 220).astype(int)
            s_words = en_words[rng.choice(len(en_words), int(s_len.sum()), p=en_p)]
            t_words = de_words[rng.choice(len(de_words), int(t_len.sum()), p=de_p)]
            s_cut, t_cut = np.cumsum(s_len), np.cumsum(t_len)
            fs.write("".join(" ".join(w) + f" {start + i}\n"
                             for i, w in enumerate(np.split(s_words, s_cut[:-1]))))
            ft.write("".join(" ".join(w) + f" {start + i}\n"
                             for i, w in enumerate(np.split(t_words, t_cut[:-1]))))
    (folder / "done").write_text("ok\n")
    return src, tgt


def data_root() -> Path:
    return Path(os.environ.get("TRANSFORMER_DATA", ROOT.parent / "shared" / "data"))


def multi30k_text(work: Path) -> tuple[Path, Path]:
    """Multi30k's training split as plain text files (what the in-memory baseline reads)."""
    out = work / "multi30k"
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for lang in ("en", "de"):
        target = out / f"train.{lang}"
        if not target.is_file():
            with gzip.open(data_root() / "multi30k" / f"train.{lang}.gz", "rb") as f:
                target.write_bytes(f.read())
        files.append(target)
    return files[0], files[1]


# ------------------------------------------------------------------------------------ steps


def transformer(*args: str) -> list[str]:
    return [PYTHON, "-m", "transformer", *args]


def train_flags(args: argparse.Namespace) -> list[str]:
    return ["--preset", args.preset, "--max-tokens", str(args.max_tokens), "--threads",
            str(args.threads), "--precision", "fp32", "--eval-every", "0", "--log-every", "1",
            "--no-progress", "--seed", "0"]


def tokens_per_s(run_dir: Path, skip: int) -> float:
    """Training tokens/s over the updates after the first ``skip`` (the steady state), from the
    per-update records (``--log-every 1``: each holds its update's tokens/s)."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r.get("kind") == "train"]
    seconds = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(train, train[1:], strict=False)]
    steady = list(zip(train[1:], seconds, strict=True))[skip - 1:]
    return sum(r["tokens_per_s"] * s for r, s in steady) / sum(s for _, s in steady)


def prepare_dir(work: Path, name: str, src: Path, tgt: Path, args: argparse.Namespace,
                *extra: str) -> tuple[Path, dict]:
    out = work / f"prepared-{name}"
    shutil.rmtree(out, ignore_errors=True)
    result = run_timed(transformer("prepare", "--train-src", str(src), "--train-tgt", str(tgt),
                                   "--vocab-size", str(args.vocab_size), "--workers",
                                   str(args.workers), "--no-progress", "--out", str(out), *extra),
                       log=work / f"prepare-{name}.log")
    return out, result


def train_run(work: Path, name: str, data: list[str], args: argparse.Namespace, steps: int,
              env: dict | None = None) -> tuple[Path, dict]:
    run_dir = work / f"run-{name}"
    shutil.rmtree(run_dir, ignore_errors=True)
    result = run_timed(transformer("train", *data, *train_flags(args), "--max-steps", str(steps),
                                   "--out", str(run_dir)), env=env,
                       first_update=run_dir / "metrics.jsonl", log=work / f"train-{name}.log")
    result["setup_s"] = setup_s(result, run_dir / "metrics.jsonl")
    return run_dir, result


def ddp(work: Path, data_dir: Path, args: argparse.Namespace, ranks: int) -> dict:
    """Peak RSS/PSS of ``ranks`` gloo ranks training from ``data_dir`` (one process for 1)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run_dir = work / f"run-ddp{ranks}"
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = transformer("train", "--data-dir", str(data_dir), *train_flags(args), "--threads", "1",
                      "--max-steps", str(args.ddp_steps), "--out", str(run_dir))
    procs, monitors = [], []
    began = time.perf_counter()
    for rank in range(ranks):
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        if ranks > 1:
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                       LOCAL_RANK=str(rank), WORLD_SIZE=str(ranks))
        log = open(work / f"ddp{ranks}-{rank}.log", "w")  # noqa: SIM115
        procs.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=log), log))
    # one sampler over all ranks: the sum at each instant
    class Group(TreeMemory):
        def pids(self) -> list[int]:
            return [p for proc, _ in procs for p in process_tree(proc.pid)]

    monitors = Group(procs[0][0].pid)
    for proc, log in procs:
        proc.wait()
        log.close()
        if proc.returncode != 0:
            raise SystemExit(f"ddp rank failed: see {work}/ddp{ranks}-*.log")
    return {"ranks": ranks, "wall_s": round(time.perf_counter() - began, 2), **monitors.stop()}


def measure(size: int, args: argparse.Namespace, baselines: dict) -> dict:
    work = args.work
    src, tgt = write_corpus(work / f"corpus-{size}", size)
    row: dict = {"pairs": size, "text_bytes": src.stat().st_size + tgt.stat().st_size}
    data_dir, prep = prepare_dir(work, str(size), src, tgt, args)
    row["prepare"] = prep
    print(f"  prepare {size:,}: {prep}", flush=True)
    run_dir, train = train_run(work, str(size), ["--data-dir", str(data_dir)], args, args.steps)
    train["tokens_per_s"] = round(tokens_per_s(run_dir, args.skip), 1)
    train["rss_beyond_model_gb"] = round(train["max_process_rss_gb"]
                                         - baselines["tiny"]["max_process_rss_gb"], 3)
    row["train"] = train
    print(f"  train {size:,}: {train}", flush=True)
    resume = run_timed(transformer("train", "--resume", str(run_dir), "--max-steps",
                                   str(args.steps + 3), "--no-progress"),
                       first_update=run_dir / "metrics.jsonl", after_step=args.steps,
                       log=work / f"resume-{size}.log")
    resume["setup_s"] = setup_s(resume, run_dir / "metrics.jsonl", after=args.steps)
    resume["rss_beyond_model_gb"] = round(resume["max_process_rss_gb"]
                                          - baselines["tiny"]["max_process_rss_gb"], 3)
    row["resume"] = resume
    print(f"  resume {size:,}: {resume}", flush=True)
    one, two = ddp(work, data_dir, args, 1), ddp(work, data_dir, args, 2)
    extra = {kind: round(two[f"tree_{kind}_gb"] - one[f"tree_{kind}_gb"], 3) for kind in ("rss", "pss")}
    tiny = baselines["ddp_tiny"]
    row["ddp"] = {"one": one, "two": two,
                  "extra_rank_rss_gb": extra["rss"], "extra_rank_pss_gb": extra["pss"],
                  # beyond what a rank of the same model on a 2,000-pair directory adds
                  "extra_rank_data_rss_gb": round(extra["rss"] - tiny["extra_rank_rss_gb"], 3),
                  "extra_rank_data_pss_gb": round(extra["pss"] - tiny["extra_rank_pss_gb"], 3)}
    print(f"  ddp {size:,}: {row['ddp']}", flush=True)
    return row


def measure_baselines(args: argparse.Namespace) -> dict:
    """Multi30k trained in memory and prepared (tokens/s, time to the first update) and a
    2,000-pair directory (the memory of the model, its optimizer and one extra gloo rank)."""
    m_src, m_tgt = multi30k_text(args.work)
    baselines: dict = {}
    m30k_dir, prep = prepare_dir(args.work, "multi30k", m_src, m_tgt, args)
    baselines["multi30k_prepare"] = prep
    # the same batches read both ways, in alternating rounds (machine noise hits both alike); the
    # best round counts, as in train_throughput.py
    contenders = {"multi30k_memory": ["--train-src", str(m_src), "--train-tgt", str(m_tgt),
                                      "--vocab-size", str(args.vocab_size)],
                  "multi30k_prepared": ["--data-dir", str(m30k_dir)]}
    for round_ in range(args.rounds):
        for name, data in contenders.items():
            run_dir, result = train_run(args.work, name, data, args, args.steps)
            result["tokens_per_s"] = round(tokens_per_s(run_dir, args.skip), 1)
            rounds = baselines.setdefault(name, {"rounds": []})["rounds"]
            rounds.append(result)
            best = max(rounds, key=lambda r: r["tokens_per_s"])
            baselines[name] = {**best, "rounds": rounds}
            print(f"  round {round_ + 1} {name}: {result['tokens_per_s']:,.0f} tokens/s", flush=True)
    tiny_src, tiny_tgt = args.work / "tiny.en", args.work / "tiny.de"
    tiny_src.write_text("".join(m_src.read_text().splitlines(True)[:2000]))
    tiny_tgt.write_text("".join(m_tgt.read_text().splitlines(True)[:2000]))
    tiny_dir, _ = prepare_dir(args.work, "tiny", tiny_src, tiny_tgt, args,
                              "--tokenizer-from", str(m30k_dir))
    _, baselines["tiny"] = train_run(args.work, "tiny", ["--data-dir", str(tiny_dir)], args, 3)
    one, two = ddp(args.work, tiny_dir, args, 1), ddp(args.work, tiny_dir, args, 2)
    baselines["ddp_tiny"] = {"one": one, "two": two,
                             "extra_rank_rss_gb": round(two["tree_rss_gb"] - one["tree_rss_gb"], 3),
                             "extra_rank_pss_gb": round(two["tree_pss_gb"] - one["tree_pss_gb"], 3)}
    return baselines


def print_table(rows: list[dict], baselines: dict, args: argparse.Namespace) -> None:
    memory_tps = baselines["multi30k_memory"]["tokens_per_s"]
    print()
    print(f"in-memory Multi30k: {memory_tps:,.0f} tokens/s; Multi30k prepared: "
          f"{baselines['multi30k_prepared']['tokens_per_s']:,.0f} tokens/s (same batches, best of "
          f"{args.rounds} alternating rounds); "
          f"first update {baselines['multi30k_memory']['first_update_s']}s in memory, "
          f"{baselines['multi30k_prepared']['first_update_s']}s prepared")
    print(f"one extra gloo rank of this model on a 2,000-pair directory: "
          f"{baselines['ddp_tiny']['extra_rank_rss_gb']} GB RSS, "
          f"{baselines['ddp_tiny']['extra_rank_pss_gb']} GB PSS")
    header = (f"{'pairs':>9} {'prep s':>7} {'prep GB':>8} {'1st upd s':>9} {'setup s':>7} "
              f"{'train GB':>8} {'+data GB':>8} {'tok/s':>7} {'vs mem':>6} {'resume s':>8} "
              f"{'setup s':>7} {'+rank GB':>8} {'(data)':>6} {'+rank PSS':>9} {'(data)':>6}")
    print(header)
    for r in rows:
        t, z, d = r["train"], r["resume"], r["ddp"]
        print(f"{r['pairs']:>9,} {r['prepare']['wall_s']:>7.1f} {r['prepare']['tree_rss_gb']:>8.2f} "
              f"{t['first_update_s']:>9.1f} {t['setup_s']:>7.1f} {t['max_process_rss_gb']:>8.2f} "
              f"{t['rss_beyond_model_gb']:>8.2f} {t['tokens_per_s']:>7.0f} "
              f"{t['tokens_per_s'] / memory_tps:>6.3f} {z['first_update_s']:>8.1f} {z['setup_s']:>7.1f} "
              f"{d['extra_rank_rss_gb']:>8.2f} {d['extra_rank_data_rss_gb']:>6.2f} "
              f"{d['extra_rank_pss_gb']:>9.2f} {d['extra_rank_data_pss_gb']:>6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 4_500_000])
    parser.add_argument("--work", type=Path, default=Path("/tmp/data_scale"))
    parser.add_argument("--preset", default="small", help="the model trained (default small)")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--steps", type=int, default=30, help="updates of each training run")
    parser.add_argument("--skip", type=int, default=5, help="updates left out of tokens/s")
    parser.add_argument("--ddp-steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating rounds of the Multi30k in-memory/prepared comparison")
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "data_scale.json")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    baselines = measure_baselines(args)
    print(f"baselines: {json.dumps(baselines)}", flush=True)
    rows = [measure(size, args, baselines) for size in args.sizes]
    print_table(rows, baselines, args)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    args.output.write_text(json.dumps({"machine": describe(), "settings": settings,
                                       "baselines": baselines, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
