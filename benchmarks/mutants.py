"""Mutation testing of the modules that guard users (issue 36), with mutmut: for each module, a
copy of ``src/``, ``tests/`` and ``pyproject.toml`` in a temporary folder (the working tree is
never mutated), ``mutmut run`` there on that module alone against the tests that cover it, and the
counts per module. Prints a table, writes the counts as JSON and every survivor's diff to a report.

    python benchmarks/mutants.py                          # every module (CPU heavy: nice it)
    python benchmarks/mutants.py serving/guard.py atomic.py --out mutants-report

``make mutants`` runs it. Survivors judged equivalent (no input can tell them from the original)
are listed in EQUIVALENT with the reason and counted apart: the kill rate is killed / (mutants -
equivalent - not checked), where "not checked" are mutants no selected test reaches.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# module under src/transformer -> the tests that cover it (what mutmut runs against its mutants)
MODULES: dict[str, list[str]] = {
    "serving/guard.py": ["tests/serving/test_guard.py", "tests/serving/test_bad_input.py"],
    "atomic.py": ["tests/test_atomic.py", "tests/test_atomic_dirs.py"],
    "training/run_lifecycle.py": ["tests/training/test_auto_resume.py"],
    "serving/schemas.py": ["tests/serving/test_schemas.py", "tests/serving/test_bad_input.py"],
    "serving/batcher.py": ["tests/serving/test_batching.py"],
    "serving/models.py": ["tests/serving"],
    "training/run_lock.py": ["tests/training/test_run_lock.py", "tests/training/test_run_lock_details.py"],
    "training/preemption.py": ["tests/training/test_preemption.py"],
    "model_dir/weights.py": ["tests/model_dir", "tests/training/test_checkpoint.py",
                             "tests/serving/test_api.py", "tests/fuzz/test_readers.py"],
    "model_dir/record.py": ["tests/model_dir", "tests/fuzz/test_readers.py"],
    "data/text_files.py": ["tests/data/test_text_files.py", "tests/data/test_text_files_details.py",
                           "tests/data/test_parallel.py"],
    "convert/marian.py": ["tests/convert/test_marian.py", "tests/convert/test_marian_refusals.py"],
    "data/seen_hashes.py": ["tests/data/test_seen_hashes.py"],
}

# mutmut's name of a surviving mutant -> why no test can kill it (the same behaviour)
EQUIVALENT: dict[str, str] = {
    "transformer.serving.guard.xǁGuardǁ_key_ok__mutmut_17":
        "the Authorization header's default b'XXXX' does not start with 'bearer ', as b'' does not",
    "transformer.serving.guard.xǁGuardǁ_handle__mutmut_4":
        "scope.get('headers', None): an ASGI http scope always holds headers",
    "transformer.serving.guard.xǁGuardǁ_handle__mutmut_6":
        "scope.get('headers'): an ASGI http scope always holds headers",
    "transformer.serving.guard.xǁGuardǁ_handle__mutmut_92":
        "more_body's default None is falsy, as False",
    "transformer.serving.guard.xǁGuardǁ_handle__mutmut_94":
        "more_body's default None (get without a default) is falsy, as False",
    "transformer.serving.guard.xǁGuardǁ_handle__mutmut_104":
        "codec names are case-insensitive: 'UTF-8' is 'utf-8'",
    "transformer.serving.guard.xǁGuardǁ_handle__mutmut_112":
        "sent = None before the first receive: falsy, as False",
    "transformer.atomic.x__fsync_path__mutmut_8":
        "getattr(os, 'O_DIRECTORY', None): the default is used only where os has no O_DIRECTORY",
    "transformer.atomic.x__fsync_path__mutmut_11":
        "getattr(os, 'O_DIRECTORY'): differs only where os has no O_DIRECTORY",
    "transformer.atomic.x__fsync_path__mutmut_14":
        "getattr(os, 'O_DIRECTORY', 1): the default is used only where os has no O_DIRECTORY",
    "transformer.atomic.x_atomic_write_text__mutmut_11":
        "codec names are case-insensitive: 'UTF-8' is 'utf-8'",
    "transformer.serving.batcher.xǁBatcherǁ__init____mutmut_21":
        "_held = '' at start: falsy, as None ('self._held or queue.get()')",
    "transformer.serving.batcher.xǁBatcherǁ_next_batch__mutmut_4":
        "_held = '' once taken: falsy, as None ('self._held or queue.get()')",
    "transformer.serving.batcher.xǁBatcherǁsubmit__mutmut_10":
        "Job.queued_at is never read",
    "transformer.serving.batcher.xǁBatcherǁsubmit__mutmut_14":
        "Job.queued_at is never read",
    "transformer.serving.batcher.xǁBatcherǁ_next_batch__mutmut_17":
        "left < 0 against left <= 0: differs only when the float time left is exactly 0.0",
    "transformer.training.run_lock.x_read_holder__mutmut_4":
        "the lock file holds a pid and a host name, ASCII in any locale's encoding",
    "transformer.training.run_lock.x_read_holder__mutmut_6":
        "codec names are case-insensitive: 'UTF-8' is 'utf-8'",
    "transformer.training.run_lock.xǁRunLockǁacquire__mutmut_32":
        "ftruncate(fd, 1) then a write of 2 bytes or more from offset 0 leaves what ftruncate(fd, 0) does",
    "transformer.serving.schemas.x_error_line__mutmut_8":
        "an error without a type: None matches no kind, as '' does not",
    "transformer.serving.schemas.x_error_line__mutmut_10":
        "an error without a type: None matches no kind, as '' does not",
    "transformer.serving.schemas.x_error_line__mutmut_13":
        "an error without a type: 'XXXX' matches no kind, as '' does not",
    "transformer.data.text_files.xǁ_OwnedGzipǁ__init____mutmut_2":
        "GzipFile(mode=None) takes the file object's mode, 'rb'",
    "transformer.data.text_files.xǁ_OwnedGzipǁ__init____mutmut_4":
        "GzipFile without a mode takes the file object's mode, 'rb'",
    "transformer.data.text_files.x__open_binary__mutmut_14":
        "peek(3)[:2] is peek(2)[:2]: peek returns what is buffered, at least the 2 bytes compared",
    "transformer.data.text_files.x_iter_file_lines__mutmut_34":
        "codec names are case-insensitive: 'UTF-8' is 'utf-8'",
    "transformer.data.text_files.x_read_json__mutmut_4":
        "codec names are case-insensitive: 'UTF-8' is 'utf-8'",
    "transformer.model_dir.weights.x__aliases__mutmut_2":
        "state_dict(keep_vars=None): detached tensors share their parameters' storage (same pointer)",
    "transformer.model_dir.weights.x__aliases__mutmut_3":
        "state_dict(keep_vars=False): detached tensors share their parameters' storage (same pointer)",
    "transformer.model_dir.weights.x_load_weights__mutmut_41":
        "load_model(strict=None): strict checks only the names, which load_weights checked before",
    "transformer.model_dir.weights.x_load_weights__mutmut_44":
        "load_model without strict: True is its default",
    "transformer.model_dir.weights.x_load_weights__mutmut_46":
        "load_model(strict=False): strict checks only the names, which load_weights checked before",
    "transformer.model_dir.record.x_read_config__mutmut_13":
        "codec names are case-insensitive: 'UTF-8' is 'utf-8'",
    "transformer.serving.models.xǁServedModelǁclassify_batch__mutmut_19":
        "zip(strict=...): Classifier checks one label name per output of the model: equal lengths",
    "transformer.serving.models.xǁServedModelǁclassify_batch__mutmut_22":
        "zip(strict=...): Classifier checks one label name per output of the model: equal lengths",
    "transformer.serving.models.xǁServedModelǁclassify_batch__mutmut_23":
        "zip(strict=...): Classifier checks one label name per output of the model: equal lengths",
    "transformer.serving.models.xǁServedModelǁthresholds__mutmut_11":
        "zip(strict=...): Classifier checks one threshold per label name: equal lengths",
    "transformer.serving.models.xǁServedModelǁthresholds__mutmut_14":
        "zip(strict=...): Classifier checks one threshold per label name: equal lengths",
    "transformer.serving.models.xǁServedModelǁthresholds__mutmut_15":
        "zip(strict=...): Classifier checks one threshold per label name: equal lengths",
    "transformer.convert.marian.x_model_config__mutmut_77":
        "scale_embedding's default None: 'is True' refuses it as it refuses False",
    "transformer.convert.marian.x_model_config__mutmut_79":
        "scale_embedding's default None: 'is True' refuses it as it refuses False",
    "transformer.convert.marian.x_model_config__mutmut_93":
        "normalize_before's default None: 'not None' is 'not False'",
    "transformer.convert.marian.x_model_config__mutmut_95":
        "normalize_before's default None: 'not None' is 'not False'",
    "transformer.convert.marian.x_model_config__mutmut_108":
        "normalize_embedding's default None: 'not None' is 'not False'",
    "transformer.convert.marian.x_model_config__mutmut_110":
        "normalize_embedding's default None: 'not None' is 'not False'",
    "transformer.convert.marian.x_model_config__mutmut_122":
        "add_final_layer_norm's default None: 'not None' is 'not False'",
    "transformer.convert.marian.x_model_config__mutmut_124":
        "add_final_layer_norm's default None: 'not None' is 'not False'",
    "transformer.convert.marian.x_model_config__mutmut_191":
        "ModelConfig's pad_id defaults to 0, which is PAD_ID",
    "transformer.convert.marian.x_model_config__mutmut_193":
        "ModelConfig's positional defaults to 'sinusoidal'",
    "transformer.convert.marian.x_read_weights__mutmut_19":
        "torch.load(weights_only=None): torch 2.6+ takes its default, True",
    "transformer.convert.marian.x_read_weights__mutmut_22":
        "torch.load without weights_only: torch 2.6+ defaults to True",
    "transformer.convert.marian.x_import_marian__mutmut_87":
        "load_state_dict's strict checks names only; convert_state makes every name of the model, and a size mismatch fails either way",
    "transformer.convert.marian.x_import_marian__mutmut_89":
        "load_state_dict's strict checks names only; convert_state makes every name of the model, and a size mismatch fails either way",
    "transformer.convert.marian.x_import_marian__mutmut_98":
        "load_state_dict's strict checks names only; convert_state makes every name of the model, and a size mismatch fails either way",
    "transformer.training.run_lifecycle.x_plain__mutmut_3":
        "json.dumps(sort_keys=None): key order does not change the dicts compared",
    "transformer.training.run_lifecycle.x_plain__mutmut_5":
        "json.dumps without sort_keys: key order does not change the dicts compared",
    "transformer.training.run_lifecycle.x_plain__mutmut_6":
        "json.dumps(sort_keys=False): key order does not change the dicts compared",
    "transformer.training.run_lock.xǁRunLockǁ__init____mutmut_5":
        "_created is set by acquire before release reads it (release returns at once without a "
        "descriptor)",
    "transformer.data.seen_hashes.xǁSeenHashesǁ_push__mutmut_6":
        "the sort's algorithm: the same sorted run (stable, timsort, merges the two runs in linear "
        "time; the default introsort takes n log n)",
    "transformer.data.seen_hashes.xǁSeenHashesǁ_push__mutmut_8":
        "the sort's algorithm: the same sorted run (as _push__mutmut_6)",
    "transformer.data.seen_hashes.xǁSeenHashesǁ_push__mutmut_11":
        "NumPy reads the sort kind case-insensitively: 'STABLE' is 'stable'",
}

STATUSES = ("killed", "survived", "timeout", "no tests", "skipped", "suspicious", "segfault",
            "not checked", "caught by type check")


def run_module(module: str, tests: list[str], *, keep: Path | None) -> dict:
    """mutmut on ``module`` in a fresh copy; returns its counts and surviving mutants' diffs."""
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        root = Path(tmp)
        ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache", "mutants")
        shutil.copytree(REPO / "src", root / "src", ignore=ignore)
        shutil.copytree(REPO / "tests", root / "tests", ignore=ignore)
        pyproject = (REPO / "pyproject.toml").read_text()
        pyproject = re.sub(r"\n\[tool\.mutmut\].*?(?=\n\[|\Z)", "\n", pyproject, flags=re.S)
        pyproject += "\n[tool.mutmut]\n" + "\n".join([
            'source_paths = ["src"]',
            f'only_mutate = ["src/transformer/{module}"]',
            f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
            'pytest_add_cli_args = ["-p", "no:cacheprovider", "-m", "not slow", "-q"]',
            "use_git_change_detection = false",
            # fork (the default) segfaults at exit in a process holding torch and asyncio threads
            'process_isolation = "forkserver"',
        ]) + "\n"
        (root / "pyproject.toml").write_text(pyproject)
        env = {**os.environ, "TRANSFORMER_DATA": os.environ.get(
            "TRANSFORMER_DATA", str(REPO.parent / "shared" / "data"))}
        mutmut = [sys.executable, "-m", "mutmut"]

        def results() -> dict[str, str]:
            out = subprocess.run([*mutmut, "results", "--all", "true"], cwd=root, env=env,
                                 capture_output=True, text=True).stdout
            found = {}
            for line in out.splitlines():
                name, sep, status = line.strip().rpartition(": ")
                if sep and status in STATUSES:
                    found[name] = status
            return found

        start = time.perf_counter()
        # A mutant that kills its own test process (run_lock's os.kill(pid, 0) made a real signal)
        # takes mutmut's fork server down with it: mutmut names it as lost. It counts as killed (the
        # tests cannot pass), and mutmut resumes with the mutants not yet checked.
        crashed: set[str] = set()
        done = subprocess.run([*mutmut, "run"], cwd=root, env=env, capture_output=True, text=True)
        for _ in range(5):
            lost = set(re.findall(r"^\s+- (\S+__mutmut_\d+)$", done.stdout + done.stderr, re.M))
            if not lost:
                break
            crashed |= lost
            left = [n for n, status in results().items() if status == "not checked" and n not in crashed]
            if not left:
                break
            done = subprocess.run([*mutmut, "run", *left], cwd=root, env=env, capture_output=True,
                                  text=True)
        seconds = time.perf_counter() - start
        statuses = results()
        for name in crashed:
            if statuses.get(name) == "not checked":
                statuses[name] = "killed"
        survivors = {}
        for name, status in statuses.items():
            if status in ("survived", "suspicious"):
                survivors[name] = subprocess.run([*mutmut, "show", name], cwd=root, env=env,
                                                 capture_output=True, text=True).stdout
        if keep is not None:
            shutil.copytree(root / "mutants", keep / module.replace("/", "."), dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
    counts = {s: sum(v == s for v in statuses.values()) for s in STATUSES}
    equivalent = [n for n in survivors if n in EQUIVALENT]
    checked = len(statuses) - counts["not checked"] - counts["no tests"] - counts["skipped"]
    killed = counts["killed"] + counts["timeout"] + counts["caught by type check"]
    denominator = checked - len(equivalent)
    return {"module": module, "tests": tests, "mutants": len(statuses), "counts": counts,
            "equivalent": equivalent, "killed": killed,
            "kill_rate": killed / denominator if denominator else None,
            "survivors": {n: d for n, d in survivors.items() if n not in EQUIVALENT},
            "crashed_the_tests": sorted(crashed),
            "seconds": round(seconds, 1), "mutmut_exit": done.returncode,
            "mutmut_tail": done.stdout[-1500:] + done.stderr[-1500:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"modules under src/transformer (default: {', '.join(MODULES)})")
    parser.add_argument("--out", default="mutants-report", help="folder for report.md and results.json")
    parser.add_argument("--keep", action="store_true", help="keep each module's mutants/ folder in --out")
    args = parser.parse_args()
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown module {unknown[0]!r}: one of {', '.join(MODULES)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.json"
    previous = json.loads(results_path.read_text()) if results_path.exists() else {}
    for module in args.modules or list(MODULES):
        print(f"mutmut on {module} ...", flush=True)
        previous[module] = run_module(module, MODULES[module], keep=out if args.keep else None)
        results_path.write_text(json.dumps(previous, indent=1) + "\n")
    lines = ["# Mutation testing (mutmut)", "",
             "| module | mutants | killed | survived | equivalent | not reached | kill rate | s |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for module, r in previous.items():
        c = r["counts"]
        rate = "-" if r["kill_rate"] is None else f"{100 * r['kill_rate']:.1f}%"
        lines.append(f"| {module} | {r['mutants']} | {r['killed']} | {len(r['survivors'])} | "
                     f"{len(r['equivalent'])} | {c['no tests'] + c['not checked']} | {rate} | {r['seconds']} |")
    table = "\n".join(lines)
    print(table)
    report = [table, ""]
    for module, r in previous.items():
        for name in r["equivalent"]:
            report += [f"- equivalent: `{name}`: {EQUIVALENT[name]}"]
        for name, diff in r["survivors"].items():
            report += ["", f"## {module}: {name}", "", "```diff", diff.strip(), "```"]
    (out / "report.md").write_text("\n".join(report) + "\n")
    print(f"survivors: {out / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
