"""``classify predict --file IN -o OUT``: predictions written a window at a time through
``OUT.partial``; ``--resume`` continues an interrupted run to the bytes one run writes (the
machinery is translate's, killed with SIGKILL in tests/cli/test_translate_resume.py); what cannot
be resumed is refused in one line."""

from __future__ import annotations

import json

import pytest
import torch

from transformer import ModelConfig, TransformerClassifier
from transformer.cli import main
from transformer.config import decoding
from transformer.inference.classifier import Classifier
from transformer.model_dir import save_model_dir


@pytest.fixture(autouse=True)
def _small_windows(monkeypatch):
    monkeypatch.setattr(decoding, "FILE_WINDOW_TEXTS", 16)
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory, tokenizer):
    torch.manual_seed(0)
    cfg = ModelConfig.tiny(tokenizer.vocab_size, d_model=32, num_heads=4, d_ff=64, dropout=0.0,
                           num_encoder_layers=1, num_decoder_layers=0, max_len=32)
    model = TransformerClassifier(cfg, num_labels=3, multi_label=True)
    path = tmp_path_factory.mktemp("classifier") / "model"
    save_model_dir(path, model, config={"task": "classification", "labels": ["a", "b", "c"],
                                        "classifier": {"num_labels": 3, "multi_label": True}},
                   src_tokenizer=tokenizer, tgt_tokenizer=None)
    return path


class Killed(BaseException):
    """Stands for a kill between two windows."""


def predict(model, src, out, *extra) -> int:
    return main(["classify", "predict", "--model", str(model), "-i", str(src), "-o", str(out),
                 "--threads", "1", *extra])


@pytest.mark.parametrize("flags", [[], ["--json"]], ids=["plain", "json"])
def test_resume_after_an_interruption_matches_one_run(cli, classifier_dir, tmp_path,
                                                      monkeypatch, capsys, flags):
    lines = cli.numbers(100, empty_every=13)
    src = cli.write(tmp_path / "in.txt", lines)
    whole, out = tmp_path / "whole.txt", tmp_path / "out.txt"
    assert predict(classifier_dir, src, whole, *flags) == 0
    if flags:
        summary = json.loads(capsys.readouterr().out)
        assert summary["num_texts"] == 100 and summary["output"] == str(whole)
        rows = [json.loads(line) for line in cli.read(whole)]
        assert [r["line"] for r in rows] == list(range(1, 101))
        assert [r["text"] for r in rows] == [line for line in lines]
    else:
        assert main(["classify", "predict", "--model", str(classifier_dir), "--file", str(src),
                     "--threads", "1"]) == 0
        assert capsys.readouterr().out == whole.read_text(encoding="utf-8")
    real, calls = Classifier.predict, []

    def stopped(self, texts, **kwargs):
        calls.append(1)
        if len(calls) > 3:
            raise Killed
        return real(self, texts, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(Classifier, "predict", stopped)
        with pytest.raises(Killed):
            predict(classifier_dir, src, out, *flags)
    partial = out.with_name("out.txt.partial")
    assert partial.read_bytes().count(b"\n") == 48 and not out.exists()
    with partial.open("ab") as f:
        f.write(b"x" * 100_000)
    assert predict(classifier_dir, src, out, *flags) == 2
    assert "pass --resume" in cli.one_line_error(capsys)
    assert predict(classifier_dir, src, out, *[f for f in ["--json"] if f not in flags],
                   "--resume") == 2
    assert "(json differ)" in cli.one_line_error(capsys)
    assert predict(classifier_dir, src, out, *flags, "--resume") == 0
    assert out.read_bytes() == whole.read_bytes()
    assert not partial.exists() and not out.with_name("out.txt.progress.json").exists()


def test_output_needs_a_file_and_resume_needs_output(cli, classifier_dir, tmp_path, capsys):
    out = tmp_path / "out.txt"
    assert main(["classify", "predict", "--model", str(classifier_dir), "-o", str(out),
                 "one"]) == 2
    assert "--file" in cli.one_line_error(capsys)
    src = cli.write(tmp_path / "in.txt", ["one", "two"])
    assert main(["classify", "predict", "--model", str(classifier_dir), "--file", str(src),
                 "--resume"]) == 2
    assert "-o" in cli.one_line_error(capsys)
    assert predict(classifier_dir, src, out, "--resume") == 2
    assert "no interrupted run" in cli.one_line_error(capsys)
