"""``--resume auto`` before the run's first checkpoint: the same configuration starts the run
again, another one is refused before anything in the directory is touched (the command line's
view, with real training: tests/cli/test_reliability.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest

import transformer.training.train_translation as auto_resume
from transformer.config.runs import TranslationTrainConfig
from transformer.errors import InputError
from transformer.model_dir import FORMAT_VERSION, read_record
from transformer.training.checkpoint import CHECKPOINT_DIR


@pytest.fixture
def started(tmp_path, monkeypatch):
    """A run directory as a run of ``cfg`` killed before its first checkpoint leaves it (its
    config, metrics and a snapshot, no checkpoint), and the calls that would train in it."""
    cfg = TranslationTrainConfig(data="numbers", max_steps=10, eval_every=5)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"format_version": FORMAT_VERSION, "task": "translation",
                                                "model": cfg.model.to_dict(),
                                                "training": cfg.to_dict()}))
    (run / "metrics.jsonl").write_text('{"kind": "train", "step": 1}\n')
    (run / "snapshot.safetensors").write_bytes(b"weights")
    calls = []
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
    ((field, value),) = change.items()
    line = str(refused.value)
    assert f": {field} (stored {getattr(cfg, field)!r}, given {value!r}); " in line
    assert line.startswith(f"{run / 'config.json'}: the run there was trained with another ")
    assert "\n" not in line
    assert calls == [] and contents(run) == before
    assert not (run / CHECKPOINT_DIR).exists()


def test_the_same_configuration_starts_over(started):
    """The same flags, or ones that may change on resume (the budget), start the run again in the
    same directory (replacing what the killed run left)."""
    cfg, run, calls = started
    auto_resume.train_or_resume_translation(dataclasses.replace(cfg, max_steps=20), run_dir=run)
    ((given, kw),) = calls
    assert given.max_steps == 20 and "resumed" not in kw and kw["run_dir"] == run
    assert not (run / "metrics.jsonl").exists()  # what the killed run wrote is cleared


def test_an_empty_directory_starts_without_overwriting(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(auto_resume, "train_translation", lambda c, **kw: calls.append(kw) or {})
    cfg = TranslationTrainConfig(data="numbers", max_steps=10)
    run = tmp_path / "new"
    run.mkdir()
    (run / "metrics.jsonl").write_text("kept\n")  # not a run's (no config.json): left alone
    auto_resume.train_or_resume_translation(cfg, run_dir=run)
    assert len(calls) == 1 and "resumed" not in calls[0]
    assert (run / "metrics.jsonl").read_text() == "kept\n"


def test_a_run_with_a_checkpoint_resumes_with_the_flags_given(started):
    """With a checkpoint, the same configuration resumes (device and progress passed on),
    another one is refused."""
    cfg, run, calls = started
    (run / CHECKPOINT_DIR).mkdir()
    auto_resume.train_or_resume_translation(cfg, run_dir=run, device="cpu", progress=True)
    record = read_record(run)
    assert calls == [(cfg, {"run_dir": run, "device": "cpu", "progress": True, "resumed": record})]
    calls.clear()
    auto_resume.train_or_resume_translation(cfg, run_dir=run)
    assert calls == [(cfg, {"run_dir": run, "device": "auto", "progress": False, "resumed": record})]
    calls.clear()
    with pytest.raises(InputError, match="seed"):
        auto_resume.train_or_resume_translation(dataclasses.replace(cfg, seed=5), run_dir=run)
    assert calls == []


def test_a_fresh_start_passes_its_flags_on(started, tmp_path):
    cfg, run, calls = started
    source = tmp_path / "pretrained"
    auto_resume.train_or_resume_translation(cfg, run_dir=tmp_path / "new", device="cpu",
                                            progress=True, init_from=source)
    assert calls == [(cfg, {"run_dir": tmp_path / "new", "device": "cpu", "progress": True,
                            "init_from": source})]


def edit_config(run, **changes):
    path = run / "config.json"
    config = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    path.write_text(json.dumps(config))


@pytest.mark.parametrize(("stored", "reason"), [
    ({"training": None}, "holds no training configuration; not a run to resume"),
    ({"training": "not a dict"}, "'training' must be a JSON object"),  # the record's own check
])
def test_a_directory_that_holds_no_run_is_refused(started, stored, reason):
    cfg, run, calls = started
    edit_config(run, **stored)
    with pytest.raises(InputError) as refused:
        auto_resume.train_or_resume_translation(cfg, run_dir=run)
    assert str(refused.value) == f"{run / 'config.json'}: {reason}"
    assert calls == []


@pytest.mark.parametrize(("edit", "words"), [
    (lambda t: t.pop("model"), ["model (stored None, given {"]),  # a section the run lacks
    (lambda t: t.__setitem__("colour", "red"), ["colour (stored 'red', given None)"]),  # one it has extra
    (lambda t: t["model"].__setitem__("d_model", 7), ["model.d_model (stored 7, given "]),
])
def test_every_field_is_compared_both_ways(started, edit, words):
    cfg, run, calls = started
    config = json.loads((run / "config.json").read_text())
    edit(config["training"])
    (run / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError) as refused:
        auto_resume.train_or_resume_translation(cfg, run_dir=run)
    for word in words:
        assert word in str(refused.value)
    assert calls == []


@pytest.mark.parametrize(("stored", "given", "ok"), [
    (None, None, True), ("SRC", "SRC", True), (None, "SRC", False), ("SRC", None, False),
    ("SRC", "OTHER", False),
])
def test_a_run_restarts_only_from_the_model_it_started_from(started, tmp_path, stored, given, ok):
    """--init-from must be the run's own: the stored path (resolved) or none for random weights."""
    cfg, run, calls = started
    paths = {"SRC": tmp_path / "src_model", "OTHER": tmp_path / "other_model", None: None}
    edit_config(run, init_from=None if stored is None else {"path": str(paths[stored].resolve())})
    if ok:
        auto_resume.train_or_resume_translation(cfg, run_dir=run, init_from=paths[given])
        assert len(calls) == 1
        return
    with pytest.raises(InputError) as refused:
        auto_resume.train_or_resume_translation(cfg, run_dir=run, init_from=paths[given])
    want = (f"{run / 'config.json'}: the run there started from "
            f"{paths[stored].resolve() if stored else 'random weights'}, not "
            f"{paths[given].resolve() if given else 'random weights'}; give the same --init-from, "
            "or another --out")
    assert str(refused.value) == want and calls == []
    (run / CHECKPOINT_DIR).mkdir()  # the same with a checkpoint
    with pytest.raises(InputError):
        auto_resume.train_or_resume_translation(cfg, run_dir=run, init_from=paths[given])
    assert calls == []
