"""``transformer classify train/predict/evaluate`` end to end on tiny synthetic files, and bad input
as one line naming the file and line with exit status 2."""

from __future__ import annotations

import io
import json
import random

import pytest
import torch

from transformer.cli import main

WORDS = ["the", "a", "movie", "film", "plot", "actor", "scene", "music", "story", "ending", "was", "is", "very", "quite", "really"]
FAST = ["--preset", "tiny", "--vocab-size", "300", "--epochs", "8", "--lr", "3e-3", "--threads", "1"]


@pytest.fixture(autouse=True)
def _restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def sentiment_rows(n: int, *, seed: int) -> list[tuple[str, str]]:
    """Texts of filler words with "great" (pos) or "awful" (neg) somewhere in them."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 10))]
        pos = rng.random() < 0.5
        words.insert(rng.randrange(len(words) + 1), "great" if pos else "awful")
        rows.append((" ".join(words), "pos" if pos else "neg"))
    return rows


def emotion_rows(n: int, *, seed: int) -> list[tuple[str, str]]:
    """Multi-label: joy if "great", anger if "awful", sad if "boring", else neutral."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 10))]
        labels = []
        for key, label in (("great", "joy"), ("awful", "anger"), ("boring", "sad")):
            if rng.random() < 0.5:
                words.insert(rng.randrange(len(words) + 1), key)
                labels.append(label)
        rows.append((" ".join(words), ",".join(labels) or "neutral"))
    return rows


def write_tsv(path, rows, header=("text", "label")):
    path.write_text("\t".join(header) + "\n" + "".join(f"{t}\t{lab}\n" for t, lab in rows), encoding="utf-8")
    return str(path)


def run_json(capsys, argv) -> dict:
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def error_of(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("transformer: error: ") and "\n" not in err and "Traceback" not in err
    return err


@pytest.fixture(scope="module")
def sentiment_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("sentiment")
    train = write_tsv(root / "train.tsv", sentiment_rows(600, seed=0))
    valid = write_tsv(root / "valid.tsv", sentiment_rows(100, seed=1))
    test = write_tsv(root / "test.tsv", sentiment_rows(100, seed=2))
    before = torch.get_num_threads()
    code = main(["classify", "train", "--train", train, "--valid", valid, "--out", str(root / "run"),
                 *FAST, "--json"])
    torch.set_num_threads(before)
    assert code == 0
    return root, test


def test_train_reports_and_writes_a_model_directory(sentiment_model):
    root, _ = sentiment_model
    run = root / "run"
    for name in ("config.json", "model.safetensors", "tokenizer", "metrics.jsonl", "results.json"):
        assert (run / name).exists(), name
    config = json.loads((run / "config.json").read_text())
    assert config["task"] == "classification" and config["labels"] == ["neg", "pos"]
    assert config["classifier"]["multi_label"] is False
    results = json.loads((run / "results.json").read_text())
    assert results["splits"]["valid"]["accuracy"] >= 0.95


def test_predict_from_stdin_counts_empty_and_truncated_texts(sentiment_model, capsys, monkeypatch):
    root, _ = sentiment_model
    long_text = " ".join(["great"] + ["movie"] * 200)  # beyond the 64 positions of the tiny preset
    monkeypatch.setattr("sys.stdin", io.StringIO(f"a great film\n\n{long_text}\nawful plot\n"))
    out = run_json(capsys, ["classify", "predict", "--model", str(root / "run"), "--json"])
    assert out["num_texts"] == 4 and out["num_empty"] == 1 and out["num_truncated"] == 1
    rows = out["predictions"]
    assert [r["labels"] for r in rows[:1] + rows[3:]] == [["pos"], ["neg"]]
    assert all(len(r["labels"]) == 1 for r in rows)  # the empty text is predicted too
    assert all(sum(r["probabilities"].values()) == pytest.approx(1.0, abs=1e-4) for r in rows)
    # plain output: one line per input text, label and probability
    monkeypatch.setattr("sys.stdin", io.StringIO("a great film\n\nawful plot\n"))
    assert main(["classify", "predict", "--model", str(root / "run")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[0].startswith("pos ") and lines[2].startswith("neg ")


def test_evaluate_file_json_and_table(sentiment_model, capsys):
    root, test = sentiment_model
    out = run_json(capsys, ["classify", "evaluate", "--model", str(root / "run"), "--file", test, "--json"])
    assert out["accuracy"] >= 0.95 and out["num_examples"] == 100
    assert {row["label"] for row in out["labels"]} == {"neg", "pos"}
    assert set(out) >= {"micro_f1", "macro_f1", "macro_precision", "num_truncated", "num_empty"}
    assert main(["classify", "evaluate", "--model", str(root / "run"), "--file", test]) == 0
    table = capsys.readouterr().out
    assert "precision" in table and "macro avg" in table


def test_multi_label_stores_tuned_thresholds(tmp_path, capsys):
    train = write_tsv(tmp_path / "train.tsv", emotion_rows(800, seed=0))
    valid = write_tsv(tmp_path / "valid.tsv", emotion_rows(150, seed=1))
    test = write_tsv(tmp_path / "test.tsv", emotion_rows(150, seed=2))
    run = str(tmp_path / "run")
    summary = run_json(capsys, ["classify", "train", "--train", train, "--valid", valid, "--out", run,
                                *FAST, "--epochs", "12", "--json"])
    assert summary["multi_label"] is True and len(summary["thresholds"]) == 4
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["thresholds"] == summary["thresholds"]
    assert config["best_validation"]["macro_f1"] >= config["best_validation"]["macro_f1_at_0.5"]
    out = run_json(capsys, ["classify", "evaluate", "--model", run, "--file", test, "--json"])
    assert out["multi_label"] is True and out["macro_f1"] >= 0.9


def test_bad_input_is_one_line_naming_file_and_line(tmp_path, capsys):
    train = write_tsv(tmp_path / "train.tsv", sentiment_rows(50, seed=0))
    unknown = write_tsv(tmp_path / "valid.tsv", [("a great film", "pos"), ("meh", "neutral")])
    ragged = tmp_path / "ragged.tsv"
    ragged.write_text("text\tlabel\nfine film\tpos\nbroken\trow\textra\n", encoding="utf-8")
    base = ["classify", "train", "--out", str(tmp_path / "run"), *FAST]

    err = error_of(capsys, [*base, "--train", train, "--valid", unknown])
    assert "valid.tsv, line 3" in err and "neutral" in err
    err = error_of(capsys, [*base, "--train", train, "--text-column", "review"])
    assert "train.tsv, line 1" in err and "review" in err
    err = error_of(capsys, [*base, "--train", str(ragged)])
    assert "ragged.tsv, line 3" in err
    err = error_of(capsys, [*base, "--train", str(tmp_path / "missing.tsv")])
    assert "missing.tsv" in err
    assert not (tmp_path / "run" / "config.json").exists()


def test_evaluate_and_predict_refuse_bad_models_and_files(sentiment_model, tmp_path, capsys):
    root, _ = sentiment_model
    unknown = write_tsv(tmp_path / "test.tsv", [("a great film", "pos"), ("meh", "neutral")])
    err = error_of(capsys, ["classify", "evaluate", "--model", str(root / "run"), "--file", unknown])
    assert "test.tsv, line 3" in err and "neutral" in err
    err = error_of(capsys, ["classify", "predict", "--model", str(tmp_path / "nowhere"), "text"])
    assert "nowhere" in err
    err = error_of(capsys, ["classify", "train", "--train", unknown, "--out", str(root / "run"), *FAST])
    assert "already holds a model" in err
