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
:mod:`~transformer.training.stages`.

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
from pathlib import Path
from typing import Any

import numpy as np
import torch

from transformer.atomic import atomic_write_text
from transformer.config.runs import RESUME_FIELDS, ClassifierTrainConfig
from transformer.data.classification import ClassificationData
from transformer.data.classification_splits import SplitRecipe
from transformer.data.labels import LabelVocabulary
from transformer.errors import InputError
from transformer.model_dir import (
    CONFIG_FILE,
    RunRecord,
    load_model_dir,
    read_record,
    save_model_dir,
)
from transformer.precision import PrecisionChoice
from transformer.training.checkpoint import has_checkpoint
from transformer.training.classification_task import ClassificationTask
from transformer.training.classifier_inputs import ClassifierInputs, classifier_inputs
from transformer.training.classifier_setup import ClassifierModel, Labels, setup_labels, setup_model
from transformer.training.rng import seed_everything
from transformer.training.run_lock import hold_run_dir
from transformer.training.schedule import LRSchedule
from transformer.training.stages import (
    metrics_log,
    run_summary,
    setup_optimizer,
    setup_precision,
    train,
)
from transformer.training.tensorboard import TENSORBOARD_DIR, require_tensorboard

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
    resume: bool = False,
) -> dict[str, Any]:
    """Train on ``splits["train"]``, select and tune on ``splits["valid"]`` (when present), then
    report every split with the best model. Returns the summary also written to ``results.json``.
    With ``resume``, continue the run in ``run_dir`` from its checkpoint, on the same ``splits``
    (its labels, tokenizer and stored configuration are kept; ``config`` may change the budget).

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
    stored = read_record(run_dir) if resume else None
    labels = setup_labels(splits["train"], multi_label=multi_label, stored=stored)
    seed_everything(config.seed)
    built = setup_model(config, splits["train"], labels=labels, init_from=init_from,
                        resumed=run_dir if resume else None)
    model = built.model.to(device)
    precision = setup_precision(config.precision, model=model, device=device,
                                previous=stored.section("precision") if stored else None)
    log.info("classifier: %d labels (%s), %s parameters, vocabulary %d", labels.count,
             "multi-label" if labels.multi_label else "single-label", f"{model.num_parameters():,}",
             built.tokenizer.vocab_size)
    inputs = classifier_inputs(splits, config, tokenizer=built.tokenizer,
                               max_len=model.max_tokens, pad_id=model.config.pad_id,
                               num_labels=labels.count, multi_label=labels.multi_label)
    task = setup_task(config, inputs, labels=labels, pad_id=model.config.pad_id)
    optimizer, scheduler = setup_optimizer(
        model, schedule=schedule_for(config, d_model=model.config.d_model,
                                     batches_per_epoch=len(inputs.data)),
        weight_decay=config.weight_decay)
    writer = ClassifierWriter(run_dir, built, labels, task=task, config=stored_config(
        config, splits, labels=labels, precision=precision, recipe=recipe, data_info=data_info,
        built=built, stored=stored))
    if not resume:  # the model directory is complete from the start: a resume can read it
        writer.save(model, None)
    with metrics_log(run_dir, tensorboard=config.tensorboard, precision=precision) as metrics:
        _, result = train(model=model, task=task, optimizer=optimizer, scheduler=scheduler,
                          data=inputs.data, loop=config.loop_config(precision.precision),
                          run_dir=run_dir, save_best=writer.save, device=device,
                          progress=progress, resume=resume, metrics=metrics)
    figures = report_splits(run_dir, splits, device=device)
    summary = {
        **run_summary(result, run_dir=run_dir, model=model, precision=precision),
        "multi_label": labels.multi_label,
        "num_labels": labels.count,
        "vocab_size": built.tokenizer.vocab_size,
        "train_examples": inputs.train_examples,
        "train_truncated": inputs.train_truncated,
        "tokenizer_s": round(built.tokenizer_s, 1),
        "train_s": round(result.elapsed_s, 1),
        "total_s": round(time.monotonic() - started, 1),
        "tokens_per_s": round(result.tokens_per_s),
        "thresholds": writer.config["thresholds"],
        "splits": figures,
    }
    atomic_write_text(run_dir / RESULTS_FILE, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


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


def train_classifier_run(
    config: ClassifierTrainConfig,
    *,
    run_dir: str | Path,
    overwrite: bool = False,
    preset: str | None = None,
    data: str | None = None,
    train: str | None = None,
    valid: str | None = None,
    test: str | None = None,
    columns: dict[str, Any] | None = None,
    split_seed: int | None = None,
    multi_label: bool | None = None,
    device: str | torch.device = "cpu",
    progress: bool = False,
    init_from: str | Path | None = None,
) -> dict[str, Any]:
    """``transformer classify train``: refuse (or with ``overwrite`` clear) a model already in
    ``run_dir``, read the splits (a corpus by name, or files; ``columns`` holds text_column,
    label_column, format and label_separator) and :func:`train_classifier` on them (from
    ``init_from``'s encoder when given)."""
    run_dir = Path(run_dir)
    with hold_run_dir(run_dir):
        return _train_classifier_run(
            config, run_dir=run_dir, overwrite=overwrite, preset=preset, data=data, train=train,
            valid=valid, test=test, columns=columns, split_seed=split_seed,
            multi_label=multi_label, device=device, progress=progress, init_from=init_from)


def _train_classifier_run(config: ClassifierTrainConfig, *, run_dir: Path, overwrite: bool,
                          preset: str | None, data: str | None, train: str | None,
                          valid: str | None, test: str | None, columns: dict[str, Any] | None,
                          split_seed: int | None, multi_label: bool | None,
                          device: str | torch.device, progress: bool,
                          init_from: str | Path | None = None) -> dict[str, Any]:
    """:func:`train_classifier_run` once the run directory's lock is held."""
    import shutil

    from transformer.data.classification_splits import DEFAULT_SEED, resolve_splits

    if init_from is not None and Path(init_from).resolve() == run_dir.resolve():
        raise InputError(f"{run_dir}: --init-from and --out are the same directory")
    if (run_dir / "config.json").exists():
        if not overwrite:
            raise InputError(f"{run_dir} already holds a model; pass --overwrite to replace it")
        for name in ("metrics.jsonl", RESULTS_FILE):
            (run_dir / name).unlink(missing_ok=True)
        for name in ("checkpoint", "checkpoint.old", "checkpoint.tmp", TENSORBOARD_DIR):
            shutil.rmtree(run_dir / name, ignore_errors=True)
    splits, recipe, info = resolve_splits(
        data=data, train=train, valid=valid, test=test, **(columns or {}),
        seed=split_seed if split_seed is not None else DEFAULT_SEED,
    )
    return train_classifier(splits, config=config, run_dir=run_dir, multi_label=multi_label,
                            recipe=recipe, data_info={**info, "preset": preset}, device=device,
                            progress=progress, init_from=init_from)


def resume_classifier(run_dir: str | Path, *, device: str | torch.device = "cpu",
                      progress: bool = False, **stop: Any) -> dict[str, Any]:
    """``transformer classify train --resume RUN_DIR``: continue the classifier run in ``run_dir``
    exactly, holding its lock, on the data it recorded (read again the same way, and refused when
    it changed); ``stop`` may change epochs, max_steps, minutes or patience (a larger budget),
    save_every, save_minutes, max_bad_updates or tensorboard."""
    run_dir = Path(run_dir)
    with hold_run_dir(run_dir):
        stored = read_record(run_dir)
        if stored.is_translation or stored.classifier is None or not stored.training:
            raise InputError(f"{run_dir / CONFIG_FILE}: not a classifier run that can be resumed "
                             "(a translation run resumes with train --resume)")
        if not has_checkpoint(run_dir):
            raise InputError(f"{run_dir / 'checkpoint'}: no checkpoint to resume from")
        bad = sorted(set(stop) - set(RESUME_FIELDS))
        if bad:
            raise ValueError(f"only {', '.join(RESUME_FIELDS)} can change on resume, not "
                             f"{', '.join(bad)}")
        try:
            config = ClassifierTrainConfig.from_dict(stored.section("training"))
        except (TypeError, ValueError) as err:
            raise InputError(f"{run_dir / CONFIG_FILE}: bad training configuration: {err}") from None
        config = config.replace(**{k: v for k, v in stop.items() if v is not None})
        splits, recipe = recorded_splits(stored)
        return train_classifier(splits, config=config, run_dir=run_dir, recipe=recipe,
                                device=device, progress=progress, resume=True)


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
