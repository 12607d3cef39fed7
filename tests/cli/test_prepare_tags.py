"""``prepare --tags`` end to end on the demo task: one small model trained on two tagged corpora
(numbers en->de tagged ``>>de<<``, the same swapped de->en tagged ``>>en<<``) through prepare and
``train --data-dir`` translates each direction with ``translate --tag``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from transformer.cli import main
from transformer.data.builtin_task import number_task_splits
from transformer.data.prepared.prepare import prepare
from transformer.data.prepared.request import PrepareRequest
from transformer.serving.models import load_served

MODEL = ["--preset", "tiny", "--d-model", "64", "--num-heads", "4", "--layers", "2", "--d-ff", "256",
         "--dropout", "0.1", "--max-len", "64"]
LOOP = ["--max-tokens", "1024", "--schedule", "inverse_sqrt", "--lr", "3e-3", "--warmup", "200",
        "--label-smoothing", "0.1", "--clip-norm", "1.0", "--max-steps", "1500", "--eval-every", "500",
        "--metric", "exact_match", "--bleu-sample", "200", "--seed", "0", "--threads", "2",
        "--precision", "fp32", "--no-progress"]


def write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return str(path)


def both_ways(root: Path, corpus, split: str) -> list[tuple[str, str]]:
    """The split's en->de files and its swap, de->en."""
    en = write(root / f"{split}.en", list(corpus.src))
    de = write(root / f"{split}.de", list(corpus.tgt))
    return [(en, de), (de, en)]


def test_the_tags_reach_the_model_record_and_get_v1_models(tmp_path):
    splits = number_task_splits(0, train_size=200, valid_size=20, test_size=20, max_number=9_999)
    data = tmp_path / "data"
    prepare(PrepareRequest(train=both_ways(tmp_path, splits["train"], "train"),
                           tags=[">>de<<", ">>en<<"], vocab_size=100, character_coverage=1.0,
                           byte_fallback=False, workers=1, out=str(data)))
    run = tmp_path / "run"
    assert main(["train", "--data-dir", str(data), "--preset", "tiny", "--d-model", "16", "--d-ff",
                 "32", "--num-heads", "2", "--layers", "1", "--max-steps", "2", "--threads", "1",
                 "--precision", "fp32", "--no-progress", "--out", str(run)]) == 0
    assert json.loads((run / "config.json").read_text())["data"]["tags"] == [">>de<<", ">>en<<"]
    described = load_served({"both": str(run)})["both"].describe()
    assert described["tags"] == [">>de<<", ">>en<<"] and described["target_langs"] == ["de", "en"]


@pytest.mark.slow
def test_one_model_on_two_tagged_corpora_translates_both_ways(tmp_path, capsys):
    began = time.perf_counter()
    splits = number_task_splits(0, train_size=4000, valid_size=200, test_size=300, max_number=9_999)
    data = tmp_path / "data"
    # the demo's tokenizer: every character of the task kept ("ö" is rare), no byte pieces
    prepare(PrepareRequest(train=both_ways(tmp_path, splits["train"], "train"),
                           valid=both_ways(tmp_path, splits["valid"], "valid"),
                           tags=[">>de<<", ">>en<<"], vocab_size=100, character_coverage=1.0,
                           byte_fallback=False, workers=1, out=str(data)))
    run = tmp_path / "run"
    assert main(["train", "--data-dir", str(data), *MODEL, *LOOP, "--out", str(run)]) == 0
    record = json.loads((run / "config.json").read_text())
    assert record["data"]["tags"] == [">>de<<", ">>en<<"]
    test = splits["test"]
    figures = {}
    for tag, sources, references in ((">>de<<", test.src, test.tgt), (">>en<<", test.tgt, test.src)):
        out = tmp_path / f"out{tag[2:4]}"
        assert main(["translate", "--model", str(run), "--tag", tag, "-i",
                     write(tmp_path / f"in{tag[2:4]}", list(sources)), "-o", str(out),
                     "--no-progress", "--threads", "2"]) == 0
        hyps = out.read_text(encoding="utf-8").splitlines()
        figures[tag] = sum(h == r for h, r in zip(hyps, references, strict=True)) / len(references)
    capsys.readouterr()
    print(f"exact match {figures} in {time.perf_counter() - began:.0f}s")
    assert all(v > 0.95 for v in figures.values()), figures
