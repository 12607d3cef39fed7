"""Golden outputs: what the public commands and the server answer on small runs, pinned so that a
change that should not change behaviour (a refactor) can be proven bit-identical.

    python benchmarks/golden.py --out golden-before.json            # before the change
    python benchmarks/golden.py --out golden-after.json --compare golden-before.json

Everything runs through the command line and the HTTP API (never internal names), on one thread,
fp32 unless a row says otherwise: a 200-update demo run (its logged losses and final weights), a
short `train` on examples/ and a `classify train` on examples/ (losses, weights), translations
greedy, beam 4 with n-best and int8 (with scores), `evaluate`, `attention --json`, `classify
predict`, and the server's /v1/translate, /v1/attention, /v1/classify and /v1/models answers.
The figures depend on the CPU's instruction set: compare runs from one machine only. Prints a
table (one row per output: identical or not) and writes the outputs as JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
NUMBERS = ["three hundred twelve", "forty-two", "nine thousand and one", "seven",
           "two thousand three hundred fifty-six", "eighty-eight", ""]


def _cli(*args: str, stdin: str | None = None) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-m", "transformer", *args], input=stdin, env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"transformer {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def _sha(path: Path) -> str:
    """The file's hash; for a torch state file, the hash of its tensors only (it also holds times)."""
    if path.suffix != ".pt":
        return hashlib.sha256(path.read_bytes()).hexdigest()
    import torch

    digest = hashlib.sha256()

    def walk(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            digest.update(value.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(value, dict):
            for key in sorted(value, key=str):
                walk(value[key])
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk(torch.load(path, map_location="cpu", weights_only=True))
    return digest.hexdigest()


def _run_record(run: Path) -> dict[str, Any]:
    """A run's logged losses (every row of metrics.jsonl without times) and its weights' hashes."""
    rows = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows.append(_strip_times(row))
    weights = {"model.safetensors": _sha(run / "model.safetensors")}
    for path in sorted((run / "checkpoint").glob("*")) if (run / "checkpoint").is_dir() else []:
        if path.suffix in (".safetensors", ".pt"):
            weights[f"checkpoint/{path.name}"] = _sha(path)
    config = json.loads((run / "config.json").read_text())
    config.get("training", {}).pop("trained", None)
    return {"metrics": rows, "weights": weights, "config": _strip_times(config)}


def _strip_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_times(v) for k, v in value.items()
                if not any(w in k for w in ("time", "second", "minutes_used", "date", "elapsed",
                                             "per_s", "host", "eta", "probe", "reason", "timing"))}
    if isinstance(value, list):
        return [_strip_times(v) for v in value]
    return value


def _json_lines(text: str) -> list[Any]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def train_runs(tmp: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    _cli("demo", "--threads", "1", "--max-steps", "200", "--out", str(tmp / "demo"), "--no-progress")
    out["demo_run"] = _run_record(tmp / "demo")
    _cli("train", "--train-src", str(EXAMPLES / "train.en"), "--train-tgt", str(EXAMPLES / "train.de"),
         "--valid-src", str(EXAMPLES / "valid.en"), "--valid-tgt", str(EXAMPLES / "valid.de"),
         "--preset", "tiny", "--vocab-size", "400", "--max-steps", "30", "--eval-every", "15",
         "--precision", "fp32", "--threads", "1", "--out", str(tmp / "train"), "--no-progress")
    out["train_run"] = _run_record(tmp / "train")
    _cli("classify", "train", "--train", str(EXAMPLES / "topics-train.tsv"),
         "--valid", str(EXAMPLES / "topics-valid.tsv"), "--multi-label", "--preset", "tiny", "--vocab-size", "300",
         "--max-steps", "30", "--eval-every", "15", "--precision", "fp32", "--threads", "1",
         "--out", str(tmp / "classify"), "--no-progress")
    out["classify_run"] = _run_record(tmp / "classify")
    return out


def inference(tmp: Path) -> dict[str, Any]:
    demo, clf = str(tmp / "demo"), str(tmp / "classify")
    text = "\n".join(NUMBERS) + "\n"
    out: dict[str, Any] = {}
    common = ("--threads", "1", "--no-progress", "--json")
    out["translate_greedy"] = _json_lines(_cli("translate", "--model", demo, "--beam", "1",
                                               "--precision", "fp32", *common, stdin=text))
    out["translate_beam4_nbest2"] = _json_lines(_cli("translate", "--model", demo, "--beam", "4",
                                                     "--nbest", "2", "--precision", "fp32", *common,
                                                     stdin=text))
    out["translate_int8_beam4"] = _json_lines(_cli("translate", "--model", demo, "--beam", "4",
                                                   "--precision", "int8", *common, stdin=text))
    out["evaluate"] = _strip_times(json.loads(_cli("evaluate", "--model", demo, "--precision", "fp32",
                                                   *common)))
    out["attention"] = json.loads(_cli("attention", "--model", demo, "--out",
                                       str(tmp / "att.png"), "--json", "forty-two"))
    out["attention"].pop("picture", None)
    out["attention"].pop("path", None)
    lines = (EXAMPLES / "topics-valid.tsv").read_text().splitlines()[1:8]
    out["classify_predict"] = _json_lines(_cli("classify", "predict", "--model", clf, "--json",
                                               stdin="\n".join(line.split("\t")[0] for line in lines)
                                               + "\n"))
    return out


def server(tmp: Path) -> dict[str, Any]:
    import torch
    from fastapi.testclient import TestClient

    from transformer.serving.app import ServeSettings, create_app
    from transformer.serving.models import load_served

    torch.set_num_threads(1)
    served = load_served({"demo": str(tmp / "demo"), "topics": str(tmp / "classify")},
                         precision="fp32")
    out: dict[str, Any] = {}
    with TestClient(create_app(served, settings=ServeSettings(max_wait_ms=1))) as client:
        asks = {
            "translate_greedy": ("/v1/translate", {"model": "demo", "texts": NUMBERS[:4], "beam": 1}),
            "translate_beam": ("/v1/translate", {"model": "demo", "texts": NUMBERS[:4], "beam": 4,
                                                 "nbest": 2}),
            "attention": ("/v1/attention", {"model": "demo", "text": "forty-two"}),
            "attention_classifier": ("/v1/attention", {"model": "topics",
                                                       "text": "The old man sees the dog."}),
            "classify": ("/v1/classify", {"model": "topics", "texts": ["The old man sees the dog.",
                                                                      "A bird."]}),
        }
        for name, (route, body) in asks.items():
            answer = client.post(route, json=body)
            out[name] = {"status": answer.status_code, "body": _strip_times(answer.json())}
        out["models"] = _strip_times(client.get("/v1/models").json())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="JSON file of the outputs")
    parser.add_argument("--compare", help="an earlier --out to compare with")
    parser.add_argument("--keep", help="keep the runs in this folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(args.keep or scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        runs, answers = train_runs(tmp), inference(tmp)
        served = {f"server_{name}": value for name, value in server(tmp).items()}
        # the runs' and the checkout's folders differ between the trees compared
        found = json.loads(json.dumps({**runs, **answers, **served})
                           .replace(str(tmp), "RUNS").replace(str(REPO), "REPO"))
    Path(args.out).write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    if not args.compare:
        print(f"{len(found)} outputs written to {args.out}")
        return 0
    before = json.loads(Path(args.compare).read_text())
    differ = 0
    print(f"{'output':28} {'identical':>9}")
    for name in sorted(set(before) | set(found)):
        same = before.get(name) == found.get(name)
        differ += not same
        print(f"{name:28} {'yes' if same else 'NO':>9}")
    print(f"{len(found) - differ} of {len(found)} identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
