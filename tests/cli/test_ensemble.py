"""``translate``/``evaluate`` with ensembles: several ``--model``, or ``--ensemble-last K`` (a run's
last K snapshots), and the one-line refusals."""

from __future__ import annotations

import json
import shutil

import pytest

from transformer.cli import main

LINES = ["one", "twenty three", "four hundred", "seven", "ninety nine"]


def _translate(capsys, *flags: str, beam: str = "3") -> list[dict]:
    assert main(["translate", *flags, "--json", "--beam", beam, "--engine", "torch",
                 "--precision", "fp32", *LINES]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _seen(items: list[dict]) -> list[tuple]:
    return [(i["translation"], i.get("score"), i["log_prob"]) for i in items]


@pytest.fixture(scope="module")
def ensemble_runs(tmp_path_factory, tokenizer, cli):
    """Runs of seeds 1, 2, 3, and run 1 again keeping two snapshots: runs 2 and 3's weights."""
    make_run = cli.make_run
    root = tmp_path_factory.mktemp("ensemble")
    a, b, c = (make_run(root / name, tokenizer, seed=seed) for name, seed in (("a", 1), ("b", 2), ("c", 3)))
    snapshots = root / "with_snapshots"
    shutil.copytree(a, snapshots)
    (snapshots / "snapshots").mkdir()
    shutil.copy(b / "model.safetensors", snapshots / "snapshots" / "step-0000002.safetensors")
    shutil.copy(c / "model.safetensors", snapshots / "snapshots" / "step-0000004.safetensors")
    return {"a": str(a), "b": str(b), "c": str(c), "snapshots": str(snapshots)}


@pytest.mark.parametrize("beam", ["1", "3"])
def test_one_member_and_two_identical_members_are_that_model(ensemble_runs, capsys, beam):
    a = ensemble_runs["a"]
    alone = _translate(capsys, "--model", a, beam=beam)
    twice = _translate(capsys, "--model", a, "--model", a, beam=beam)
    assert [i["translation"] for i in twice] == [i["translation"] for i in alone]
    assert [i["log_prob"] for i in twice] == pytest.approx([i["log_prob"] for i in alone], abs=1e-4)


def test_snapshot_ensemble_is_the_ensemble_of_those_weights(ensemble_runs, capsys):
    runs = ensemble_runs
    # the newest snapshot holds run c's weights: one member is that model exactly
    assert _seen(_translate(capsys, "--model", runs["snapshots"], "--ensemble-last", "1")) == \
        _seen(_translate(capsys, "--model", runs["c"]))
    two = _translate(capsys, "--model", runs["snapshots"], "--ensemble-last", "2")
    assert _seen(two) == _seen(_translate(capsys, "--model", runs["b"], "--model", runs["c"]))
    for member in ("b", "c"):
        assert _seen(two) != _seen(_translate(capsys, "--model", runs[member]))


def test_sampling_ensemble_repeats_with_its_seed(ensemble_runs, capsys):
    flags = ["--model", ensemble_runs["b"], "--model", ensemble_runs["c"], "--sampling", "--seed", "5"]
    first = _translate(capsys, *flags, beam="1")
    assert _seen(first) == _seen(_translate(capsys, *flags, beam="1"))


def test_evaluate_reports_the_members(ensemble_runs, cli, tmp_path, capsys):
    src = cli.write(tmp_path / "src", LINES)
    ref = cli.write(tmp_path / "ref", ["eins", "dreiundzwanzig", "vierhundert", "sieben", "neunundneunzig"])
    assert main(["evaluate", "--model", ensemble_runs["snapshots"], "--ensemble-last", "2",
                 "--src-file", str(src), "--ref-file", str(ref), "--json", "--precision", "fp32"]) == 0
    out = cli.json_out(capsys)
    assert out["engine"] == "torch"
    assert [p.rsplit("/", 1)[-1] for p in out["members"]] == ["step-0000002.safetensors",
                                                               "step-0000004.safetensors"]


def test_refusals_are_one_line(ensemble_runs, cli, tmp_path, capsys):
    from helpers import save_translator
    from transformer.data.tokenizer import Tokenizer

    runs = ensemble_runs
    other_tok = Tokenizer.train([f"word{i} thing{i}" for i in range(200)], vocab_size=60, byte_fallback=False)
    other = save_translator(tmp_path / "other", other_tok, seed=4)
    cases = [
        (["--model", runs["a"], "--model", str(other)], "its target tokenizer differs"),
        (["--model", runs["a"], "--model", runs["b"], "--engine", "ctranslate2"], "--engine ctranslate2"),
        (["--model", runs["snapshots"], "--ensemble-last", "3"], "holds 2 snapshot(s)"),
        (["--model", runs["a"], "--ensemble-last", "1"], "holds 0 snapshot(s)"),
        (["--model", runs["a"], "--model", runs["b"], "--ensemble-last", "1"], "snapshots of one run"),
        (["--model", runs["snapshots"], "--ensemble-last", "0"], "at least 1, got 0"),
        (["--model", runs["a"], "--model", runs["b"], "--alignments"], "--alignments"),
    ]
    for flags, message in cases:
        assert main(["translate", *flags, "one"]) == 2, flags
        assert message in cli.one_line_error(capsys), flags
