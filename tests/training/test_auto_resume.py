"""``--resume auto`` before the run's first checkpoint: the same configuration starts the run
again, another one is refused before anything in the directory is touched (the command line's
view, with real training: tests/cli/test_reliability.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest

import transformer.training.auto_resume as auto_resume
from transformer.config.runs import TranslationTrainConfig
from transformer.errors import InputError
from transformer.model_dir import FORMAT_VERSION
from transformer.training.checkpoint import CHECKPOINT_DIR


@pytest.fixture
def started(tmp_path, monkeypatch):
    """A run directory as a run of ``cfg`` killed before its first checkpoint leaves it (its
    config, metrics and a snapshot, no checkpoint), and the calls that would train in it."""
    cfg = TranslationTrainConfig(data="numbers", max_steps=10, eval_every=5)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"format_version": FORMAT_VERSION, "task": "translation",
                                                "training": cfg.to_dict()}))
    (run / "metrics.jsonl").write_text('{"kind": "train", "step": 1}\n')
    (run / "snapshot.safetensors").write_bytes(b"weights")
    calls = []
    monkeypatch.setattr(auto_resume, "start_unlocked", lambda c, **kw: calls.append((c, kw)) or {})
    monkeypatch.setattr(auto_resume, "train_translation", lambda c, **kw: calls.append((c, kw)) or {})
    return cfg, run, calls


def contents(run):
    return {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and p.name != ".lock"}


@pytest.mark.parametrize("change", [{"seed": 1}, {"max_tokens": 2048}, {"tgt_lang": "fr"},
                                    {"eval_every": 6}])
def test_another_configuration_is_refused_and_the_directory_kept(started, change):
    cfg, run, calls = started
    before = contents(run)
    other = dataclasses.replace(cfg, **change)
    with pytest.raises(InputError) as refused:
        auto_resume.train_or_resume_translation(other, run_dir=run)
    (field,) = change
    line = str(refused.value)
    assert field in line and str(run / "config.json") in line and "\n" not in line
    assert calls == [] and contents(run) == before
    assert not (run / CHECKPOINT_DIR).exists()


def test_the_same_configuration_starts_over(started):
    """The same flags, or ones that may change on resume (the budget), start the run again in the
    same directory (replacing what the killed run left)."""
    cfg, run, calls = started
    auto_resume.train_or_resume_translation(dataclasses.replace(cfg, max_steps=20), run_dir=run)
    ((given, kw),) = calls
    assert given.max_steps == 20 and kw["overwrite"] is True and kw["run_dir"] == run


def test_an_empty_directory_starts_without_overwriting(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(auto_resume, "start_unlocked", lambda c, **kw: calls.append(kw) or {})
    cfg = TranslationTrainConfig(data="numbers", max_steps=10)
    auto_resume.train_or_resume_translation(cfg, run_dir=tmp_path / "new")
    assert [kw["overwrite"] for kw in calls] == [False]
