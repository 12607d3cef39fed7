"""Training curves from ``RUN_DIR/metrics.jsonl``: loss, learning rate and the validation metric.

Each line of the file is a JSON object written by the trainer: ``{"kind": "train", "step", "loss",
"lr", "elapsed_s", ...}`` or ``{"kind": "valid", "step", "loss", "bleu", ...}``. Keys may be
missing (a classifier has ``accuracy`` or ``f1`` instead of ``bleu``; old runs lack ``lr``):
whatever is present is drawn and a panel without data says so.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure

from transformer.config.choices import METRICS
from transformer.data.text_files import json_object
from transformer.errors import InputError, read_text
from transformer.visualization.figures import new_figure, style

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The JSON objects of a metrics file, in file order; blank lines are skipped.

    Raises InputError for a missing or unreadable file, or a line that is not a JSON object
    (naming the file and line).
    """
    path = Path(path)
    text = read_text(path, "metrics file")
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        records.append(json_object(line, path=path, number=number))
    return records


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


X_AXES = {"step": ("step", 1.0, "step"), "minutes": ("elapsed_s", 60.0, "minutes of training")}


def _series(records: list[dict[str, Any]], kind: str, key: str,
            x: str = "step") -> tuple[list[float], list[float]]:
    """(x values, values) of the records of ``kind`` holding a numeric x field and ``key``; x is
    the update step or the training minutes (``elapsed_s`` / 60)."""
    field, scale, _ = X_AXES[x]
    points = []
    for r in records:
        at, value = _number(r.get(field)), _number(r.get(key))
        if r.get("kind") == kind and at is not None and value is not None:
            points.append((at / scale, value))
    points.sort(key=lambda p: p[0])
    return [p[0] for p in points], [p[1] for p in points]


def validation_metric(records: list[dict[str, Any]]) -> str | None:
    """The validation metric to draw: ``bleu`` when present, else the first of :data:`METRICS`."""
    for name in METRICS:
        if _series(records, "valid", name)[0]:
            return name
    return None


COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


def plot_training_curves(runs: list[dict[str, Any]] | dict[str, list[dict[str, Any]]], *,
                         x: str = "step", title: str = "") -> Figure:
    """Three panels: training and validation loss, the learning rate, and the validation metric
    (BLEU for translation), against the update step or (``x="minutes"``) the training minutes.

    ``runs`` is one run's records, or ``{label: records}`` to draw several runs in one figure.
    """
    if x not in X_AXES:
        raise ValueError(f"x must be one of {', '.join(X_AXES)}, got {x!r}")
    named = runs if isinstance(runs, dict) else {"": runs}
    several = len(named) > 1
    metric = next((m for m in (validation_metric(r) for r in named.values()) if m), None)
    with style():
        fig = new_figure(12.0, 3.6)
        loss_ax, lr_ax, metric_ax = fig.subplots(1, 3)
        any_loss = any_lr = False
        best: list[tuple[str, float, float]] = []  # per run drawn: name, best value, where
        for i, (name, records) in enumerate(named.items()):
            run = _RunStyle.of(name, i, several=several)
            any_loss = _plot_loss(loss_ax, records, run, x=x) or any_loss
            any_lr = _plot_lr(lr_ax, records, run, x=x) or any_lr
            if metric is not None:
                found = _plot_metric(metric_ax, records, run, x=x, metric=metric)
                if found is not None:
                    best.append((name, *found))
        if any_loss:
            loss_ax.legend()
        else:
            _empty(loss_ax, "loss")
        loss_ax.set_title("loss")
        if not any_lr:
            _empty(lr_ax, "learning rate")
        lr_ax.set_title("learning rate")
        _title_metric(metric_ax, metric, best, several=several, x=x)
        for ax in (loss_ax, lr_ax, metric_ax):
            ax.set_xlabel(X_AXES[x][2])
            ax.grid(alpha=0.3)
        if title:
            fig.suptitle(title)
    return fig


@dataclass(frozen=True)
class _RunStyle:
    """How one run is drawn: its name in the legends (none when it is alone) and its colours."""

    name: str
    several: bool
    train_color: str
    valid_color: str

    @classmethod
    def of(cls, name: str, index: int, *, several: bool) -> _RunStyle:
        """The style of run number ``index``: a pair of colours of its own among ``several``."""
        if not several:
            return cls(name, several, "tab:blue", "tab:orange")
        return cls(name, several, COLORS[(2 * index) % len(COLORS)],
                   COLORS[(2 * index + 1) % len(COLORS)])

    def label(self, what: str) -> str:
        return f"{self.name} {what}".strip() if self.several else what


def _plot_loss(ax: Axes, records: list[dict[str, Any]], run: _RunStyle, *, x: str) -> bool:
    """One run's training and validation loss; whether there was any to draw."""
    steps, loss = _series(records, "train", "loss", x)
    v_steps, v_loss = _series(records, "valid", "loss", x)
    if steps:
        ax.plot(steps, loss, label=run.label("train"), color=run.train_color, linewidth=1.2)
    if v_steps:
        ax.plot(v_steps, v_loss, label=run.label("validation"), color=run.valid_color,
                marker="o", markersize=3, linewidth=1.2)
    return bool(steps or v_steps)


def _plot_lr(ax: Axes, records: list[dict[str, Any]], run: _RunStyle, *, x: str) -> bool:
    """One run's learning rate (from the training records, else the validation ones); whether
    there was any to draw."""
    steps, lr = _series(records, "train", "lr", x)
    if not steps:
        steps, lr = _series(records, "valid", "lr", x)
    if not steps:
        return False
    ax.plot(steps, lr, color="tab:green" if not run.several else run.train_color,
            label=run.label(""), linewidth=1.2)
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    return True


def _plot_metric(ax: Axes, records: list[dict[str, Any]], run: _RunStyle, *, x: str,
                 metric: str) -> tuple[float, float] | None:
    """One run's validation ``metric``; its best value (higher is better) and where, or None
    when the run has none."""
    steps, values = _series(records, "valid", metric, x)
    if not steps:
        return None
    ax.plot(steps, values, color="tab:red" if not run.several else run.valid_color,
            label=run.label(""), marker="o", markersize=3, linewidth=1.2)
    best = max(range(len(values)), key=values.__getitem__)
    return values[best], steps[best]


def _title_metric(ax: Axes, metric: str | None, best: list[tuple[str, float, float]], *,
                  several: bool, x: str) -> None:
    """The metric panel's title with the best value of each run drawn (``best``), or a note
    that there is no validation metric."""
    if not best:
        _empty(ax, "validation metric")
        ax.set_title("validation metric")
        return
    shown = "BLEU" if metric == "bleu" else metric
    if several:
        ax.legend()
        values = ", ".join(f"{n} {v:.4g}" for n, v, _ in best)
        ax.set_title(f"validation {shown} (best: {values})")
    else:
        _, value, at = best[0]
        where = f"step {at:g}" if x == "step" else f"{at:.1f} min"
        ax.set_title(f"validation {shown} (best {value:.4g} at {where})")


def _empty(ax: Axes, what: str) -> None:
    """Say on the panel that the metrics hold no ``what``."""
    ax.text(0.5, 0.5, f"no {what} in the metrics", ha="center", va="center",
            transform=ax.transAxes, color="gray")


def plot_runs(run_dirs: list[str], *, x: str = "step") -> Figure:
    """The curves of one or more runs (a model directory, or a ``metrics.jsonl`` file each) in one
    figure, labelled by folder name when those are unambiguous, else by the path as given.

    Raises InputError naming a missing run or one with no metrics yet.
    """
    runs = {}
    for name in run_dirs:
        source = Path(name)
        if not source.exists():
            raise InputError(f"{source}: no such model directory")
        path = source / "metrics.jsonl" if source.is_dir() else source
        runs[name] = read_metrics(path)
        if not runs[name]:
            raise InputError(f"{path}: no metrics recorded yet")
    title = run_dirs[0] if len(runs) == 1 else ""
    if len(runs) == 1:
        return plot_training_curves(runs[run_dirs[0]], x=x, title=title)
    short = {name: Path(name).name or name for name in runs}
    if len(set(short.values())) == len(runs):
        runs = {short[name]: records for name, records in runs.items()}
    return plot_training_curves(runs, x=x, title=title)

