"""Training curves from ``RUN_DIR/metrics.jsonl``: loss, learning rate and the validation metric.

Each line of the file is a JSON object written by the trainer: ``{"kind": "train", "step", "loss",
"lr", "elapsed_s", ...}`` or ``{"kind": "valid", "step", "loss", "bleu", ...}``. Keys may be
missing (a classifier has ``accuracy`` or ``f1`` instead of ``bleu``; old runs lack ``lr``):
whatever is present is drawn and a panel without data says so.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure

from transformer.config.choices import METRICS
from transformer.data.text_files import json_object
from transformer.errors import InputError
from transformer.visualization.figures import new_figure, style

if TYPE_CHECKING:
    from matplotlib.axes import Axes



def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The JSON objects of a metrics file, in file order; blank lines are skipped.

    Raises InputError for a missing or unreadable file, or a line that is not a JSON object
    (naming the file and line).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read: {err}") from None
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
    colors = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")
    metric = next((m for m in (validation_metric(r) for r in named.values()) if m), None)
    with style():
        fig = new_figure(12.0, 3.6)
        loss_ax, lr_ax, metric_ax = fig.subplots(1, 3)

        def empty(ax: Axes, what: str) -> None:
            ax.text(0.5, 0.5, f"no {what} in the metrics", ha="center", va="center",
                    transform=ax.transAxes, color="gray")

        def label(name: str, what: str) -> str:
            return f"{name} {what}".strip() if several else what

        drawn = {"loss": False, "lr": False, "metric": []}
        for i, (name, records) in enumerate(named.items()):
            train_color = colors[(2 * i) % len(colors)] if several else "tab:blue"
            valid_color = colors[(2 * i + 1) % len(colors)] if several else "tab:orange"
            steps, loss = _series(records, "train", "loss", x)
            v_steps, v_loss = _series(records, "valid", "loss", x)
            if steps:
                loss_ax.plot(steps, loss, label=label(name, "train"), color=train_color,
                             linewidth=1.2)
            if v_steps:
                loss_ax.plot(v_steps, v_loss, label=label(name, "validation"), color=valid_color,
                             marker="o", markersize=3, linewidth=1.2)
            drawn["loss"] = drawn["loss"] or bool(steps or v_steps)

            steps, lr = _series(records, "train", "lr", x)
            if not steps:
                steps, lr = _series(records, "valid", "lr", x)
            if steps:
                lr_ax.plot(steps, lr, color="tab:green" if not several else train_color,
                           label=label(name, ""), linewidth=1.2)
                lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
                drawn["lr"] = True

            if metric is not None:
                m_steps, values = _series(records, "valid", metric, x)
                if m_steps:
                    metric_ax.plot(m_steps, values, color="tab:red" if not several else valid_color,
                                   label=label(name, ""), marker="o", markersize=3, linewidth=1.2)
                    best = max(range(len(values)), key=values.__getitem__)  # higher is better
                    drawn["metric"].append((name, values[best], m_steps[best]))
        if drawn["loss"]:
            loss_ax.legend()
        else:
            empty(loss_ax, "loss")
        loss_ax.set_title("loss")
        if not drawn["lr"]:
            empty(lr_ax, "learning rate")
        lr_ax.set_title("learning rate")
        if drawn["metric"]:
            shown = "BLEU" if metric == "bleu" else metric
            if several:
                metric_ax.legend()
                best = ", ".join(f"{n} {v:.4g}" for n, v, _ in drawn["metric"])
                metric_ax.set_title(f"validation {shown} (best: {best})")
            else:
                _, value, at = drawn["metric"][0]
                where = f"step {at:g}" if x == "step" else f"{at:.1f} min"
                metric_ax.set_title(f"validation {shown} (best {value:.4g} at {where})")
        else:
            empty(metric_ax, "validation metric")
            metric_ax.set_title("validation metric")
        for ax in (loss_ax, lr_ax, metric_ax):
            ax.set_xlabel(X_AXES[x][2])
            ax.grid(alpha=0.3)
        if title:
            fig.suptitle(title)
    return fig


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

