"""Soak test of training: a tiny run killed again and again, resumed each time with the same
command, must end with the weights of an uninterrupted run, bit for bit.

Phase ``kill``: SIGKILL at random moments (in start-up, in updates, inside checkpoint writes: every
update writes one), then ``train --resume auto`` with the same command, until the run completes;
then a fresh run directory, until ``--kills`` kills. After every kill the directory must be
loadable (``checkpoint/`` and the model directory, whichever exist). Phase ``term``: SIGTERM at
random moments; each must exit 143 with a checkpoint of the update that was under way (within one
update of the last one logged when the signal was sent), and resume exactly.

The task is the built-in English->German number words (``transformer.data.builtin_task``, 200
training pairs written to files), a 16-wide one-layer model, one thread. Run it on one core at low
priority:

    nice -n 5 taskset -c 1 .venv/bin/python benchmarks/soak.py        # about 10 minutes
    .venv/bin/python benchmarks/soak.py --kills 5 --terms 2 --rounds-max 3   # a smoke run

Prints a table and writes ``benchmarks/results/soak.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import describe  # benchmarks/machine.py

RESULTS = Path(__file__).resolve().parent / "results" / "soak.json"
FLAGS = ["--preset", "tiny", "--d-model", "16", "--d-ff", "32", "--num-heads", "2", "--layers", "1",
         "--vocab-size", "60", "--no-byte-fallback", "--max-tokens", "256", "--bleu-sample", "8",
         "--metric", "exact_match", "--threads", "1", "--no-progress", "--log-every", "1"]


def write_data(folder: Path) -> list[str]:
    from transformer.data.builtin_task import number_task_splits

    splits = number_task_splits(0, train_size=200, valid_size=20, test_size=10, max_number=9999)
    flags = []
    for split in ("train", "valid"):
        for side, lines in (("src", splits[split].src), ("tgt", splits[split].tgt)):
            path = folder / f"{split}.{side}"
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            flags += [f"--{split}-{side}", str(path)]
    return flags


def command(data: list[str], run: Path, args: argparse.Namespace) -> list[str]:
    return [sys.executable, "-m", "transformer", "train", *data, *FLAGS,
            "--max-steps", str(args.steps), "--eval-every", str(args.eval_every),
            "--save-every", "1", "--out", str(run), "--resume", "auto"]


def logged_step(run: Path) -> int:
    path = run / "metrics.jsonl"
    best = 0
    if path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(json.JSONDecodeError, ValueError, AttributeError):
                best = max(best, int(json.loads(line).get("step", 0)))  # else cut by the kill
    return best


def loadable(run: Path) -> tuple[bool, str, int | None]:
    """Whether what the kill left loads: (ok, why not, checkpoint step or None)."""
    from transformer.errors import InputError
    from transformer.model_dir import build_model, load_model_dir, read_config
    from transformer.training.checkpoint import has_checkpoint, load_checkpoint

    if not (run / "config.json").exists():
        return True, "", None  # killed before the model directory was first written
    try:
        load_model_dir(run)
        step = None
        if has_checkpoint(run):
            step = load_checkpoint(run, model=build_model(read_config(run)))["trainer"]["step"]
        return True, "", step
    except (InputError, OSError) as err:
        return False, str(err), None


def weights(run: Path) -> dict:
    from safetensors.torch import load_file

    return {name: load_file(str(run / name)) for name in
            ("model.safetensors", "checkpoint/model.safetensors")}


def same(a: dict, b: dict) -> bool:
    import torch

    return all(a[f].keys() == b[f].keys() and all(torch.equal(a[f][k], b[f][k]) for k in a[f])
               for f in a)


def run_to_end(cmd: list[str], env: dict) -> tuple[float, str]:
    start = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"reference run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.monotonic() - start, done.stdout


def wait_until(predicate, proc: subprocess.Popen, timeout: float) -> bool:
    """Poll ``predicate`` until it holds (True) or ``proc`` ends or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.0005)
    return True


def strike(kind: str, proc: subprocess.Popen, run: Path, timing: dict, rng: random.Random,
           steps: int) -> str | None:
    """Wait for a random moment of ``proc``'s run and say which (None: it ended first)."""
    first = logged_step(run)
    draw = rng.random()
    if kind == "kill" and draw < 0.15:  # start-up: data, tokenizer, model, the first writes
        try:
            proc.wait(timeout=rng.uniform(0, timing["startup"]))
            return None
        except subprocess.TimeoutExpired:
            return "start-up"
    if not wait_until(lambda: logged_step(run) > first, proc, 600):
        return None
    if kind == "kill" and draw < 0.5:  # the moment a checkpoint is being written
        writing = ("checkpoint.tmp", "checkpoint.old")
        found = wait_until(lambda: any((run / n).exists() for n in writing), proc, 30)
        return "checkpoint write" if found else None
    left = max(1 - logged_step(run) / steps, 0.02)
    try:
        proc.wait(timeout=rng.uniform(0, left * timing["train"]))
        return None
    except subprocess.TimeoutExpired:
        return "training"


def soak(kind: str, target: int, cmd_of, reference: dict, timing: dict, rng: random.Random,
         root: Path, env: dict, rounds_max: int, steps: int) -> dict:
    """Signal runs (``kind``: kill or term) until ``target`` signals; returns the phase's figures."""
    figures = {"signals": 0, "in_startup": 0, "in_checkpoint_write": 0, "in_training": 0,
               "after_training": 0, "resumes": 0, "rounds": 0, "divergences": 0, "unreadable": 0, "bad_exits": 0,
               "checkpoint_off_by_more_than_one": 0, "problems": []}
    sig = signal.SIGKILL if kind == "kill" else signal.SIGTERM
    while figures["signals"] < target and figures["rounds"] < rounds_max:
        figures["rounds"] += 1
        run = root / f"{kind}-{figures['rounds']}"
        cmd = cmd_of(run)
        while True:
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            moment = None if figures["signals"] >= target else strike(kind, proc, run, timing,
                                                                      rng, steps)
            if moment is not None:
                before = logged_step(run)
                proc.send_signal(sig)
                _, err = proc.communicate()
                figures["signals"] += 1
                writing = any((run / n).exists() for n in ("checkpoint.tmp", "checkpoint.old"))
                ok, why, step = loadable(run)
                if kind == "kill" and writing:
                    figures["in_checkpoint_write"] += 1
                elif moment == "start-up" and logged_step(run) == before:
                    figures["in_startup"] += 1
                else:
                    figures["in_training"] += 1
                if not ok:
                    figures["unreadable"] += 1
                    figures["problems"].append(f"{run}: {why}")
                if kind == "term":
                    after = logged_step(run)
                    if proc.returncode == -signal.SIGTERM and step == steps:
                        # training had ended (its last checkpoint written) and the handler with
                        # it: the signal's default action, exit status 143 in a shell
                        figures["after_training"] += 1
                    elif proc.returncode != 143:
                        figures["bad_exits"] += 1
                        figures["problems"].append(f"{run}: exit {proc.returncode}: {err[-300:]}")
                    elif step != after or after - before > 1:
                        figures["checkpoint_off_by_more_than_one"] += 1
                        figures["problems"].append(
                            f"{run}: logged {before} at the signal, {after} at exit, checkpoint {step}")
                figures["resumes"] += 1
                continue
            _, err = proc.communicate()
            if proc.returncode != 0:
                figures["bad_exits"] += 1
                figures["problems"].append(f"{run}: exit {proc.returncode}: {err[-300:]}")
                break
            if not same(weights(run), reference):
                figures["divergences"] += 1
                differ = [f for f in reference if not same({f: weights(run)[f]}, {f: reference[f]})]
                figures["problems"].append(f"{run}: {', '.join(differ)} differ from the straight run")
                kept = Path(tempfile.gettempdir()) / f"soak-divergent-{kind}-{figures['rounds']}"
                shutil.copytree(run, kept, dirs_exist_ok=True)
                figures["problems"].append(f"kept in {kept}")
            break
        shutil.rmtree(run, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=55, help="SIGKILLs in all (default 55)")
    parser.add_argument("--terms", type=int, default=20, help="SIGTERMs in all (default 20)")
    parser.add_argument("--steps", type=int, default=120, help="updates of a run (default 120)")
    parser.add_argument("--eval-every", type=int, default=40, help="default 40")
    parser.add_argument("--rounds-max", type=int, default=100, help="fresh runs at most per phase")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="transformer-soak-") as tmp:
        root = Path(tmp)
        data = write_data(root)

        def cmd_of(run: Path) -> list[str]:
            return command(data, run, args)

        # the uninterrupted reference, and how long start-up and training take
        probe = [sys.executable, "-c", "import transformer.cli, torch, sentencepiece"]
        startup, _ = run_to_end(probe, env)
        total, out = run_to_end([*cmd_of(root / "straight"), "--json"], env)
        reference = weights(root / "straight")
        train_s = json.loads(out.strip().splitlines()[-1])["train_s"]
        timing = {"startup": total - train_s, "train": train_s}
        phases = {}
        for kind, target in (("kill", args.kills), ("term", args.terms)):
            phases[kind] = soak(kind, target, cmd_of, reference, timing, rng, root, env,
                                args.rounds_max, args.steps)
    wall = time.monotonic() - started

    print(f"{'phase':<8} {'signals':>8} {'in start-up':>12} {'in training':>12} "
          f"{'in a checkpoint write':>22} {'after training':>15} {'resumes':>8} {'runs':>5} {'divergences':>12} "
          f"{'unreadable dirs':>16} {'bad exits':>10} {'ckpt off >1 update':>19}")
    for kind, f in phases.items():
        print(f"{'SIG' + kind.upper():<8} {f['signals']:>8} {f['in_startup']:>12} "
              f"{f['in_training']:>12} {f['in_checkpoint_write']:>22} {f['after_training']:>15} "
              f"{f['resumes']:>8} {f['rounds']:>5} "
              f"{f['divergences']:>12} {f['unreadable']:>16} {f['bad_exits']:>10} "
              f"{f['checkpoint_off_by_more_than_one']:>19}")
    for kind, f in phases.items():
        for problem in f["problems"]:
            print(f"{kind}: {problem}")
    print(f"reference run {total:.1f}s ({args.steps} updates, start-up {startup:.1f}s); "
          f"soak {wall:.0f}s in all")
    record = {
        "command": " ".join(sys.argv), "machine": platform.processor() or platform.machine(),
        "hardware": describe(),
        "python": platform.python_version(), "steps": args.steps, "eval_every": args.eval_every,
        "seed": args.seed, "reference_run_s": round(total, 2), "wall_s": round(wall, 1),
        "phases": phases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
