"""``--average-last``: the average of the last snapshots becomes the model only when it validates
better than the best single model (loss: lower; other metrics: higher)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from transformer.config import translation_config
from transformer.training.checkpoint import save_snapshot
from transformer.training.train_translation import try_average


class Scored:
    """Validation that gives the averaged model ``value`` for the metric."""

    def __init__(self, metric, value):
        self.metric, self.value = metric, value

    def evaluate(self, model):
        return {"loss": self.value if self.metric == "loss" else 1.0, self.metric: self.value}


@pytest.mark.parametrize(("metric", "best", "average", "kept"), [
    ("bleu", 30.0, 29.0, False), ("bleu", 30.0, 31.0, True),
    ("loss", 2.0, 2.5, False), ("loss", 2.0, 1.5, True),
])
def test_the_average_is_kept_only_when_it_validates_better(synth, tmp_path, metric, best, average,
                                                           kept):
    model = synth.tiny_model()
    for step in (2, 4):
        save_snapshot(tmp_path, synth.tiny_model(seed=step), step=step, keep=2)
    metrics, saved = [], []
    cfg = translation_config("tiny", {"average_last": 2, "max_steps": 4,
                                      "metric": "bleu" if metric == "loss" else metric})
    task = Scored("bleu" if metric == "bleu" else "loss", average)
    trainer = SimpleNamespace(model=model, autocast=contextlib.nullcontext, task=task,
                              write_metrics=metrics.append)
    result = SimpleNamespace(steps=4, best_metric=best)
    record = try_average(cfg, trainer, result, tmp_path,
                         lambda m, evaluation: saved.append(evaluation))
    assert record["kept"] is kept and metrics == [record]
    assert len(saved) == int(kept)
