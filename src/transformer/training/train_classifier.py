"""Training a text classifier end to end: tokenizer, model, the shared Trainer, thresholds, model
directory.

    splits = corpus_splits("nsmc")                       # or file_splits(train_path, valid=...)
    cfg = classifier_config("nsmc-cpu")                  # transformer.config
    summary = train_classifier(splits, config=cfg, run_dir="runs/nsmc", recipe=..., data_info=...)
    summary = resume_classifier("runs/nsmc", minutes=60)  # continue exactly where it stopped

:func:`train_classifier` is the recipe, its stages in order: the labels, the tokenizer and model
(:mod:`~transformer.training.classifier_setup`: trained here, the run's own on resume, or
``init_from`` a translation model's encoder), the precision, the data
(:func:`~transformer.training.classifier_inputs.classifier_inputs`), the task, the optimizer and
schedule (:func:`schedule_for`), the model directory (:class:`ClassifierWriter`), training, and
the report on every split (:func:`report_splits`). The stages translation shares are
:mod:`~transformer.training.stages`; starting, resuming and ``--resume auto`` are
:mod:`~transformer.training.run_lifecycle`'s, with :class:`ClassifierRecipe`. Under ``torchrun``
every rank trains on its shard of the batches and rank 0 alone writes.

What it writes (the model directory of DESIGN.md): ``config.json`` with ``task:
"classification"``, the model and classifier shape, the label names, the multi-label decision
thresholds (tuned on the validation split; 0.5 without one), the training configuration and where
the data came from; ``model.safetensors`` (best by validation), ``tokenizer/``, ``labels.json``,
``checkpoint/``, ``metrics.jsonl`` (with ``tensorboard``, ``tensorboard/``: its figures as
TensorBoard events) and ``results.json`` (final figures on every split). The model directory is
complete from the start, so a run stopped at any moment resumes (:func:`resume_classifier`) to
the end an uninterrupted run reaches, bit for bit.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from transformer.atomic import atomic_write_text
from transformer.config.runs import ClassifierTrainConfig
from transformer.data.classification import ClassificationData
from transformer.data.classification_splits import SplitRecipe
from transformer.data.labels import LabelVocabulary
from transformer.errors import InputError
from transformer.model_dir import RunRecord, load_model_dir, save_model_dir
from transformer.precision import PrecisionChoice
from transformer.training import distributed as D
from transformer.training import run_lifecycle as lifecycle
from transformer.training.classification_task import ClassificationTask
from transformer.training.classifier_inputs import ClassifierInputs, classifier_inputs
from transformer.training.classifier_setup import ClassifierModel, Labels, setup_labels, setup_model
from transformer.training.rng import seed_everything
from transformer.training.schedule import LRSchedule
from transformer.training.stages import (
    run_summary,
    setup_optimizer,
    setup_precision,
    training_run,
)
from transformer.training.tensorboard import require_tensorboard
from transformer.training.trainer import TrainResult

log = logging.getLogger(__name__)

RESULTS_FILE = "results.json"


def train_classifier(
    splits: dict[str, ClassificationData],
    *,
    config: ClassifierTrainConfig,
    run_dir: str | Path,
    multi_label: bool | None = None,
    recipe: SplitRecipe | None = None,
    data_info: dict[str, Any] | None = None,
    device: str | torch.device = "cpu",
    progress: bool = False,
    init_from: str | Path | None = None,
    resumed: RunRecord | None = None,
) -> dict[str, Any]:
    """Train on ``splits["train"]``, select and tune on ``splits["valid"]`` (when present), then
    report every split with the best model. Returns the summary also written to ``results.json``.
    With ``resumed`` (the run's record, :func:`~transformer.training.run_lifecycle.resumable`),
    continue the run in ``run_dir`` from its checkpoint, on the same ``splits`` (its labels,
    tokenizer and stored configuration are kept; ``config`` may change the budget). Under
    ``torchrun`` each rank trains on its shard of the batches; rank 0 writes and reports.

    ``multi_label`` defaults to "some training text has other than one label". ``recipe`` and
    ``data_info`` (where the data came from) are stored in ``config.json`` for later evaluation.
    ``init_from`` (a translation model's directory) gives the tokenizer (its source side) and the
    encoder's and embeddings' first weights; ``config`` must have its encoder's shape
    (:func:`transformer.training.init_from.classifier_config_from` builds such a ``config``).
    """
    started = time.monotonic()
    run_dir = Path(run_dir)
    if config.tensorboard:  # before any work: one line when the package is missing
        require_tensorboard()
    info, dev = D.init_distributed(device=str(device))
    stored, resume = resumed, resumed is not None
    labels = setup_labels(splits["train"], multi_label=multi_label, stored=stored)
    seed_everything(config.seed)
    built = setup_model(config, splits["train"], labels=labels, init_from=init_from,
                        resumed=(run_dir, stored) if stored else None)
    model = built.model.to(dev)
    precision = setup_precision(config.precision, model=model, device=dev,
                                previous=stored.section("precision") if stored else None)
    log.info("classifier: %d labels (%s), %s parameters, vocabulary %d", labels.count,
             "multi-label" if labels.multi_label else "single-label", f"{model.num_parameters():,}",
             built.tokenizer.vocab_size)
    inputs = classifier_inputs(splits, config, tokenizer=built.tokenizer,
                               max_len=model.max_tokens, pad_id=model.config.pad_id,
                               num_labels=labels.count, multi_label=labels.multi_label,
                               rank=info.rank, world_size=info.world_size,
                               validation=info.is_main)
    task = setup_task(config, inputs, labels=labels, pad_id=model.config.pad_id)
    optimizer, scheduler = setup_optimizer(
        model, schedule=schedule_for(config, d_model=model.config.d_model,
                                     batches_per_epoch=len(inputs.data)),
        weight_decay=config.weight_decay)
    writer = ClassifierWriter(run_dir, built, labels, task=task, config=stored_config(
        config, splits, labels=labels, precision=precision, recipe=recipe, data_info=data_info,
        built=built, stored=stored))
    with training_run(model=model, task=task, optimizer=optimizer, scheduler=scheduler,
                      data=inputs.data, loop=config.loop_config(precision.precision),
                      run_dir=run_dir, tensorboard=config.tensorboard, precision=precision,
                      save_best=writer.save, device=dev, progress=progress,
                      resume=resume) as (_, result):
        pass
    figures = report_splits(run_dir, splits, device=dev) if info.is_main else {}
    summary = {**run_summary(result, run_dir=run_dir, model=model, precision=precision),
               **_figures(result, built=built, labels=labels, inputs=inputs, started=started),
               "thresholds": writer.config["thresholds"], "splits": figures}
    if info.is_main:
        atomic_write_text(run_dir / RESULTS_FILE, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    D.barrier()
    return {**summary, "world_size": info.world_size} if info.is_distributed else summary


def _figures(result: TrainResult, *, built: ClassifierModel, labels: Labels,
             inputs: ClassifierInputs, started: float) -> dict[str, Any]:
    """The summary's figures of the classifier run: its labels, data, tokenizer and times."""
    return {
        "multi_label": labels.multi_label,
        "num_labels": labels.count,
        "vocab_size": built.tokenizer.vocab_size,
        "train_examples": inputs.train_examples,
        "train_truncated": inputs.train_truncated,
        "tokenizer_s": round(built.tokenizer_s, 1),
        "train_s": round(result.elapsed_s, 1),
        "total_s": round(time.monotonic() - started, 1),
        "tokens_per_s": round(result.tokens_per_s),
    }


# --- the data, the task and the schedule ----------------------------------------------------------


def setup_task(config: ClassifierTrainConfig, inputs: ClassifierInputs, *, labels: Labels,
               pad_id: int) -> ClassificationTask:
    """The loss (cross-entropy, or BCE with the positive weights) and validation (accuracy, F1,
    multi-label thresholds) of the run."""
    return ClassificationTask(
        num_labels=labels.count, multi_label=labels.multi_label, valid_ids=inputs.valid_ids,
        valid_labels=inputs.valid_labels, metric=config.metric,
        label_smoothing=config.label_smoothing, pos_weight=inputs.pos_weight, pad_id=pad_id,
    )


def schedule_for(config: ClassifierTrainConfig, *, d_model: int, batches_per_epoch: int) -> LRSchedule:
    """The learning rate: linear warmup to ``config.lr``, then linear decay to 0 at the last
    planned update (``max_steps``, else ``epochs`` of ``batches_per_epoch``) or 1/sqrt(step)."""
    if config.schedule == "linear":
        total = config.max_steps or (config.epochs or 1) * batches_per_epoch
        return LRSchedule(kind="linear", warmup=min(config.warmup, total), peak_lr=config.lr,
                          total=total)
    return LRSchedule(kind="inverse_sqrt", warmup=config.warmup, peak_lr=config.lr, d_model=d_model)


# --- the model directory and the report -----------------------------------------------------------


def stored_config(config: ClassifierTrainConfig, splits: dict[str, ClassificationData], *,
                  labels: Labels, precision: PrecisionChoice, recipe: SplitRecipe | None,
                  data_info: dict[str, Any] | None, built: ClassifierModel,
                  stored: RunRecord | None = None) -> dict[str, Any]:
    """``config.json`` but the model's shape (which :func:`save_model_dir` adds): the task, the
    classifier head, the labels, the thresholds (set when the model is saved), the training
    configuration, the precision and where the data came from (``data_info``, the ``recipe`` of
    the held-out splits, their sizes). A resumed run keeps what it ``stored`` (its record) with
    the configuration and precision it continues with."""
    if stored is not None:
        kept = {**stored.to_dict(), "training": config.to_dict(), "precision": precision.to_dict()}
        kept.pop("model", None)
        return kept
    return {
        "task": "classification",
        "classifier": {"num_labels": labels.count, "pooling": config.pooling,
                       "multi_label": labels.multi_label},
        "labels": list(labels.names),
        "thresholds": None,
        "training": config.to_dict(),
        "precision": precision.to_dict(),
        "data": {**(data_info or {}), "recipe": recipe.to_dict() if recipe else None,
                 "sizes": {k: len(v) for k, v in splits.items()}},
        **built.extra_config,
    }


class ClassifierWriter:
    """Writes the run's model directory, the Trainer's ``save_best``: ``config`` (see
    :func:`stored_config`) with the task's tuned thresholds (0.5 for a multi-label task without
    them) and the validation figures, the weights, the tokenizer and ``labels.json``."""

    def __init__(self, run_dir: Path, built: ClassifierModel, labels: Labels, *,
                 task: ClassificationTask, config: dict[str, Any]) -> None:
        self.run_dir = run_dir
        self.tokenizer = built.tokenizer
        self.labels = labels
        self.task = task
        self.config = config

    def save(self, model: torch.nn.Module, evaluation: dict[str, float] | None) -> None:
        """Write ``model`` with its validation figures ``evaluation`` (None: not validated yet)."""
        thresholds = self.task.thresholds if self.task.thresholds is not None else (
            np.full(self.labels.count, 0.5) if self.labels.multi_label else None)
        self.config["thresholds"] = (None if thresholds is None
                                     else [round(float(t), 4) for t in thresholds])
        if evaluation is not None:
            self.config["best_validation"] = dict(evaluation)
        save_model_dir(self.run_dir, model, config=self.config, src_tokenizer=self.tokenizer,
                       tgt_tokenizer=self.tokenizer)
        LabelVocabulary(self.labels.names).save(self.run_dir)


def report_splits(run_dir: Path, splits: dict[str, ClassificationData], *,
                  device: str | torch.device) -> dict[str, dict[str, Any]]:
    """The figures of the model in ``run_dir`` (the best) on every split but train: accuracy,
    micro and macro F1, the number of examples and of truncated ones."""
    from transformer.inference.classifier import Classifier
    from transformer.inference.classifier_eval import evaluate_classifier

    classifier = Classifier(load_model_dir(run_dir, device=device))
    figures: dict[str, Any] = {}
    for name, split in splits.items():
        if name == "train":
            continue
        evaluation = evaluate_classifier(classifier, split)
        figures[name] = {"accuracy": evaluation.report.accuracy, "micro_f1": evaluation.report.micro_f1,
                         "macro_f1": evaluation.report.macro_f1,
                         "num_examples": evaluation.report.num_examples,
                         "num_truncated": evaluation.num_truncated}
    return figures


@dataclass(frozen=True)
class ClassifierSources:
    """What a classifier run is told to train on: a corpus by name (``data``) or files (``train``,
    ``valid``, ``test``, read with ``columns``: text_column, label_column, format and
    label_separator), the held-out splits' ``split_seed``, ``multi_label`` (None: detected) and
    the ``preset`` named (recorded with the data)."""

    data: str | None = None
    train: str | None = None
    valid: str | None = None
    test: str | None = None
    columns: dict[str, Any] = field(default_factory=dict)
    split_seed: int | None = None
    multi_label: bool | None = None
    preset: str | None = None

    def read(self) -> tuple[dict[str, ClassificationData], SplitRecipe, dict[str, Any]]:
        """The splits, how the held-out ones were drawn, and config.json's ``data`` section
        but the recipe and sizes (where the data came from)."""
        from transformer.data.classification_splits import DEFAULT_SEED, resolve_splits

        splits, recipe, info = resolve_splits(
            data=self.data, train=self.train, valid=self.valid, test=self.test, **self.columns,
            seed=self.split_seed if self.split_seed is not None else DEFAULT_SEED)
        return splits, recipe, {**info, "preset": self.preset}


@dataclass
class ClassifierRecipe:
    """The classifier task's stages for :mod:`~transformer.training.run_lifecycle`: train into
    ``run_dir`` on ``device`` on the data ``sources`` name (a resume without them: the data the
    run recorded, read again the same way), from ``init_from``'s encoder when given."""

    run_dir: Path
    sources: ClassifierSources | None = None
    device: str | torch.device = "cpu"
    progress: bool = False
    init_from: str | Path | None = None
    kind: lifecycle.RunKind = lifecycle.CLASSIFICATION
    _read: tuple[dict[str, ClassificationData], SplitRecipe, dict[str, Any]] | None = field(
        default=None, init=False, repr=False)

    def given(self) -> tuple[dict[str, ClassificationData], SplitRecipe, dict[str, Any]]:
        """The data ``sources`` name, read once."""
        assert self.sources is not None
        if self._read is None:
            self._read = self.sources.read()
        return self._read

    def start(self, cfg: ClassifierTrainConfig) -> dict[str, Any]:
        splits, recipe, info = self.given()
        assert self.sources is not None
        return train_classifier(splits, config=cfg, run_dir=self.run_dir,
                                multi_label=self.sources.multi_label, recipe=recipe,
                                data_info=info, device=self.device, progress=self.progress,
                                init_from=self.init_from)

    def resume(self, cfg: ClassifierTrainConfig, record: RunRecord) -> dict[str, Any]:
        splits, recipe = self.given()[:2] if self.sources else recorded_splits(record)
        return train_classifier(splits, config=cfg, run_dir=self.run_dir, recipe=recipe,
                                device=self.device, progress=self.progress, resumed=record)

    def check_same_data(self, record: RunRecord) -> None:
        """InputError naming the first field of the data ``sources`` name (where it came from,
        how it was split, its sizes, single- or multi-label) that differs from ``record``'s."""
        splits, recipe, info = self.given()
        given = {**info, "recipe": recipe.to_dict(), "sizes": {k: len(v) for k, v in splits.items()}}
        differs = lifecycle.first_difference(lifecycle.plain(given),
                                             lifecycle.plain(record.section("data") or {}),
                                             prefix="data.")
        assert self.sources is not None and record.classifier is not None
        stored, multi_label = record.classifier.multi_label, self.sources.multi_label
        if differs is None and multi_label not in (None, stored):
            differs = f"multi_label (stored {stored!r}, given {multi_label!r})"
        if differs is not None:
            raise InputError(f"{record.source}: the run there was trained on other data: "
                             f"{differs}; give the same data flags, or another --out")


def train_classifier_run(config: ClassifierTrainConfig, *, run_dir: str | Path,
                         sources: ClassifierSources, overwrite: bool = False,
                         device: str | torch.device = "cpu", progress: bool = False,
                         init_from: str | Path | None = None) -> dict[str, Any]:
    """``transformer classify train``: refuse (or with ``overwrite`` clear) a model already in
    ``run_dir``, read the data ``sources`` name and :func:`train_classifier` on it (from
    ``init_from``'s encoder when given)."""
    recipe = ClassifierRecipe(Path(run_dir), sources, device=device, progress=progress,
                              init_from=init_from)
    return lifecycle.start_run(recipe, config, overwrite=overwrite)


def train_or_resume_classifier(config: ClassifierTrainConfig, *, run_dir: str | Path,
                               sources: ClassifierSources, device: str | torch.device = "cpu",
                               progress: bool = False,
                               init_from: str | Path | None = None) -> dict[str, Any]:
    """``transformer classify train --resume auto``: resume ``run_dir`` when it holds a checkpoint
    of this configuration on this data, else train from the start
    (:func:`~transformer.training.run_lifecycle.start_or_resume`)."""
    recipe = ClassifierRecipe(Path(run_dir), sources, device=device, progress=progress,
                              init_from=init_from)
    return lifecycle.start_or_resume(recipe, config)


def resume_classifier(run_dir: str | Path, *, device: str | torch.device = "cpu",
                      progress: bool = False, **stop: Any) -> dict[str, Any]:
    """``transformer classify train --resume RUN_DIR``: continue the classifier run in ``run_dir``
    exactly, holding its lock, on the data it recorded (read again the same way, and refused when
    it changed); ``stop`` may change epochs, max_steps, minutes or patience (a larger budget),
    save_every, save_minutes, max_bad_updates or tensorboard."""
    return lifecycle.resume_run(ClassifierRecipe(Path(run_dir), device=device, progress=progress),
                                **stop)


def recorded_splits(stored: RunRecord) -> tuple[dict[str, ClassificationData], SplitRecipe]:
    """The splits a classifier run trained on, read again as its record says (a corpus by name,
    or files with their columns; the same rows held out); InputError when they are not the
    same size as they were."""
    from transformer.data.classification_splits import DEFAULT_SEED, resolve_splits

    data = stored.section("data") or {}
    recipe = SplitRecipe.from_dict(data.get("recipe") or {"seed": DEFAULT_SEED})
    columns = {key: data[key] for key in ("text_column", "label_column", "format",
                                          "label_separator") if data.get(key) is not None}
    splits, drawn, _ = resolve_splits(data=data.get("name"), train=data.get("train"),
                                      valid=data.get("valid"), test=data.get("test"),
                                      seed=recipe.seed, **columns)
    sizes = {name: len(split) for name, split in splits.items()}
    if data.get("sizes") not in (None, sizes) or drawn != recipe:
        raise InputError(f"{stored.source}: the data the run trained on has changed (it had "
                         f"{data.get('sizes')} rows, now {sizes}); resume it on the same data")
    return splits, drawn
