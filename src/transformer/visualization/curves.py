"""Training curves from ``RUN_DIR/metrics.jsonl``: loss, learning rate and the validation metric.

Each line of the file is a JSON object written by the trainer: ``{"kind": "train", "step", "loss",
"lr", "elapsed_s", ...}`` or ``{"kind": "valid", "step", "loss", "bleu", ...}``. Keys may be
missing (a classifier has ``accuracy`` or ``f1`` instead of ``bleu``; old runs lack ``lr``):
whatever is present is drawn and a panel without data says so.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure

from transformer.errors import InputError
from transformer.visualization.figures import new_figure, style

if TYPE_CHECKING:
    from matplotlib.axes import Axes

METRICS = ("bleu", "chrf", "accuracy", "f1", "macro_f1", "micro_f1", "exact_match")


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
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{path}:{number}: not JSON ({err.msg})") from None
        if not isinstance(record, dict):
            raise InputError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
        records.append(record)
    return records


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _series(records: list[dict[str, Any]], kind: str, key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of the records of ``kind`` holding a numeric ``step`` and ``key``."""
    points = []
    for r in records:
        step, value = _number(r.get("step")), _number(r.get(key))
        if r.get("kind") == kind and step is not None and value is not None:
            points.append((step, value))
    points.sort(key=lambda p: p[0])
    return [p[0] for p in points], [p[1] for p in points]


def validation_metric(records: list[dict[str, Any]]) -> str | None:
    """The validation metric to draw: ``bleu`` when present, else the first of :data:`METRICS`."""
    for name in METRICS:
        if _series(records, "valid", name)[0]:
            return name
    return None


def plot_training_curves(records: list[dict[str, Any]], *, title: str = "") -> Figure:
    """Three panels against the update step: training and validation loss, the learning rate,
    and the validation metric (BLEU for translation)."""
    metric = validation_metric(records)
    with style():
        fig = new_figure(12.0, 3.6)
        loss_ax, lr_ax, metric_ax = fig.subplots(1, 3)

        def empty(ax: Axes, what: str) -> None:
            ax.text(0.5, 0.5, f"no {what} in the metrics", ha="center", va="center",
                    transform=ax.transAxes, color="gray")

        steps, loss = _series(records, "train", "loss")
        v_steps, v_loss = _series(records, "valid", "loss")
        if steps:
            loss_ax.plot(steps, loss, label="train", color="tab:blue", linewidth=1.2)
        if v_steps:
            loss_ax.plot(v_steps, v_loss, label="validation", color="tab:orange", marker="o",
                         markersize=3, linewidth=1.2)
        if steps or v_steps:
            loss_ax.legend()
        else:
            empty(loss_ax, "loss")
        loss_ax.set_title("loss")

        steps, lr = _series(records, "train", "lr")
        if not steps:
            steps, lr = _series(records, "valid", "lr")
        if steps:
            lr_ax.plot(steps, lr, color="tab:green", linewidth=1.2)
            lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        else:
            empty(lr_ax, "learning rate")
        lr_ax.set_title("learning rate")

        if metric is not None:
            m_steps, values = _series(records, "valid", metric)
            metric_ax.plot(m_steps, values, color="tab:red", marker="o", markersize=3,
                           linewidth=1.2)
            best = max(range(len(values)), key=values.__getitem__)  # every metric: higher is better
            name = "BLEU" if metric == "bleu" else metric
            metric_ax.set_title(f"validation {name} (best {values[best]:.4g} at step "
                                f"{m_steps[best]:g})")
        else:
            empty(metric_ax, "validation metric")
            metric_ax.set_title("validation metric")
        for ax in (loss_ax, lr_ax, metric_ax):
            ax.set_xlabel("step")
            ax.grid(alpha=0.3)
        if title:
            fig.suptitle(title)
    return fig
