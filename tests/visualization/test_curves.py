"""`transformer plot curves`: loss, learning rate and BLEU from metrics.jsonl, missing keys and all."""

from __future__ import annotations

import json

import pytest

from transformer.cli import main
from transformer.errors import InputError
from transformer.visualization import plot_training_curves, read_metrics

RECORDS = [
    {"kind": "train", "step": 10, "loss": 5.0, "lr": 1e-4, "elapsed_s": 1.0},
    {"kind": "train", "step": 20, "loss": 4.0, "lr": 2e-4},
    {"kind": "valid", "step": 20, "loss": 4.5, "bleu": 3.0},
    {"kind": "train", "step": 30, "loss": 3.0},  # no lr
    {"kind": "valid", "step": 30, "loss": 3.9},  # no bleu
    {"kind": "valid", "step": 40, "bleu": 7.5},  # no loss
    {"kind": "train", "loss": 1.0},  # no step: skipped
    {"note": "an unknown record"},
]


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def test_panels_draw_what_is_there():
    fig = plot_training_curves(RECORDS)
    loss_ax, lr_ax, bleu_ax = fig.axes
    lines = {line.get_label(): line for line in loss_ax.get_lines()}
    assert list(lines["train"].get_xdata()) == [10, 20, 30]
    assert list(lines["validation"].get_xdata()) == [20, 30]
    assert list(lr_ax.get_lines()[0].get_ydata()) == [1e-4, 2e-4]
    assert list(bleu_ax.get_lines()[0].get_ydata()) == [3.0, 7.5]
    assert "BLEU" in bleu_ax.get_title() and "7.5" in bleu_ax.get_title()


def test_minutes_axis_and_several_runs():
    timed = [{"kind": "valid", "step": 100, "elapsed_s": 90.0, "bleu": 10.0, "loss": 4.0},
             {"kind": "valid", "step": 200, "elapsed_s": 180.0, "bleu": 20.0, "loss": 3.0},
             {"kind": "valid", "step": 300, "bleu": 30.0}]  # no elapsed_s: not on a time axis
    fig = plot_training_curves(timed, x="minutes")
    assert list(fig.axes[2].get_lines()[0].get_xdata()) == [1.5, 3.0]
    assert "3.0 min" in fig.axes[2].get_title()
    other = [{"kind": "valid", "step": 100, "elapsed_s": 60.0, "bleu": 25.0}]
    fig = plot_training_curves({"en-de": timed, "de-en": other}, x="minutes")
    lines = {line.get_label(): list(line.get_ydata()) for line in fig.axes[2].get_lines()}
    assert lines == {"en-de": [10.0, 20.0], "de-en": [25.0]}
    assert "en-de 20" in fig.axes[2].get_title() and "de-en 25" in fig.axes[2].get_title()
    with pytest.raises(ValueError, match="x must be one of"):
        plot_training_curves(timed, x="hours")


def test_classifier_metrics_and_empty_panels():
    fig = plot_training_curves([{"kind": "valid", "step": 1, "accuracy": 0.5}])
    assert "accuracy" in fig.axes[2].get_title()
    assert any("no loss" in t.get_text() for t in fig.axes[0].texts)
    assert any("no learning rate" in t.get_text() for t in fig.axes[1].texts)


def test_plot_curves_command(tmp_path, png_size, capsys):
    run = tmp_path / "run"
    run.mkdir()
    _write(run / "metrics.jsonl", RECORDS)
    out = tmp_path / "curves.png"
    assert main(["plot", "curves", str(run), "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == [str(out)]
    assert png_size(out)[0] > 0
    other = tmp_path / "other"
    other.mkdir()
    _write(other / "metrics.jsonl", RECORDS)
    assert main(["plot", "curves", str(run), str(other), "--x", "minutes", "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out


def test_read_metrics_names_the_bad_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"kind": "train", "step": 1}\n\n{"kind": oops}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"metrics.jsonl, line 3: not valid JSON"):
        read_metrics(path)
    path.write_text("[1, 2]\n", encoding="utf-8")
    with pytest.raises(InputError, match=r", line 1: expected a JSON object"):
        read_metrics(path)


@pytest.mark.parametrize("setup, fragment", [
    ("missing", "no such model directory"),
    ("no-metrics", "metrics.jsonl: no such metrics file"),
    ("empty", "no metrics recorded"),
    ("bad", ", line 1: not valid JSON"),
])
def test_plot_curves_bad_input_exits_2(tmp_path, capsys, setup, fragment):
    run = tmp_path / "run"
    if setup != "missing":
        run.mkdir()
    if setup == "empty":
        (run / "metrics.jsonl").write_text("\n", encoding="utf-8")
    if setup == "bad":
        (run / "metrics.jsonl").write_text("{nope\n", encoding="utf-8")
    out = tmp_path / "c.png"
    assert main(["plot", "curves", str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1
    assert not out.exists()


def test_plot_runs_labels_by_folder_name_unless_ambiguous(tmp_path):
    from transformer.visualization.curves import plot_runs

    for folder in ("a/en-de", "a/de-en", "b/en-de"):
        (tmp_path / folder).mkdir(parents=True)
        _write(tmp_path / folder / "metrics.jsonl", RECORDS)

    def labels(fig):
        return sorted({label for ax in fig.axes for label in ax.get_legend_handles_labels()[1]})

    two = [str(tmp_path / "a/en-de"), str(tmp_path / "a/de-en")]
    assert {"en-de train", "de-en train"} <= set(labels(plot_runs(two)))
    clash = [str(tmp_path / "a/en-de"), str(tmp_path / "b/en-de")]
    drawn = labels(plot_runs(clash))
    assert {f"{clash[0]} train", f"{clash[1]} train"} <= set(drawn) and "en-de train" not in drawn
    with pytest.raises(InputError, match="no such model directory"):
        plot_runs([str(tmp_path / "missing")])
