"""Training a translation model end to end: data, tokenizers, model, the Trainer, the model directory.

    cfg = translation_config("small", {"data": "multi30k", "minutes": 30})
    summary = train_translation(cfg, run_dir="runs/m30k", progress=True)
    summary = resume_translation("runs/m30k", minutes=60)     # continue exactly where it stopped

:func:`train_translation` is the recipe, its stages in order: the tokenizers and model
(:func:`setup_model`: trained here, read from the run on resume, from ``init_from``, or the
tokenizer a prepared data directory was made with), the precision, the data (its source chosen
once by :func:`~transformer.training.translation_setup.translation_source`: a prepared directory
or text), the task, the optimizer and schedule, the model directory
(:class:`ModelWriter`), training, and the average of the last snapshots (:func:`try_average`).
The stages the classifier shares are :mod:`~transformer.training.stages`; starting, resuming and
``--resume auto`` are :mod:`~transformer.training.run_lifecycle`'s, with :class:`TranslationRecipe`.

What it writes into the run directory (DESIGN.md): ``config.json`` (model, tokenizer and training
configuration, where the data came from), ``model.safetensors`` (best by validation BLEU),
``tokenizer/``, ``checkpoint/`` (exact resume), ``metrics.jsonl`` and with ``cfg.tensorboard``
``tensorboard/`` (its figures as TensorBoard events). Under ``torchrun`` every rank trains on its
shard of the batches and rank 0 alone writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from transformer.config.runs import TranslationTrainConfig
from transformer.data.parallel import ParallelCorpus
from transformer.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from transformer.model import Transformer
from transformer.model_dir import RunRecord, save_model_dir
from transformer.precision import PrecisionChoice
from transformer.training import distributed as D
from transformer.training import run_lifecycle as lifecycle
from transformer.training.rng import seed_everything
from transformer.training.schedule import LRSchedule
from transformer.training.stages import (
    run_summary,
    setup_optimizer,
    setup_precision,
    training_run,
)
from transformer.training.tensorboard import require_tensorboard
from transformer.training.text_inputs import TranslationInputs
from transformer.training.trainer import Trainer, TrainResult
from transformer.training.translation_setup import (
    TranslationModel,
    TranslationSource,
    setup_model,
    translation_source,
)
from transformer.training.translation_task import TranslationTask

log = logging.getLogger(__name__)


def train_translation(
    cfg: TranslationTrainConfig,
    *,
    run_dir: Path | str,
    splits: dict[str, ParallelCorpus] | None = None,
    device: str = "auto",
    progress: bool = False,
    resumed: RunRecord | None = None,
    extra_config: dict[str, Any] | None = None,
    init_from: Path | str | None = None,
) -> dict[str, Any]:
    """Train (or continue the ``resumed`` run) a translation model into ``run_dir``; return a
    summary.

    ``splits`` ({"train", "valid"} corpora) replaces loading the data ``cfg`` names. With
    ``resumed`` (the run's record, :func:`~transformer.training.run_lifecycle.resumable`) the
    tokenizers and model come from ``run_dir`` and training continues from its checkpoint. ``init_from`` (a model directory: a run, or an imported model) starts from its
    weights and tokenizers with a fresh optimizer and schedule; ``cfg`` must have its shape
    (:func:`transformer.training.init_from.translation_config_from` builds such a ``cfg``).
    ``extra_config`` is stored in ``config.json`` beside the training configuration.
    """
    run_dir = Path(run_dir)
    if cfg.tensorboard:  # before any work: one line when the package is missing
        require_tensorboard()
    info, dev = D.init_distributed(device=device)
    seed_everything(cfg.seed)
    resume = resumed is not None
    source = translation_source(cfg, splits=splits, resumed=resumed)
    built = setup_model(cfg, run_dir=run_dir, resumed=resumed, init_from=init_from, source=source)
    model = built.model.to(dev)
    precision = setup_precision(cfg.precision, model=model, device=dev,
                                previous=resumed.section("precision") if resumed else None)
    _log_model(cfg, model)
    inputs = setup_data(cfg, built, source)
    task = setup_task(cfg, built, inputs)
    optimizer, scheduler = setup_optimizer(
        model, schedule=LRSchedule(**cfg.schedule_for(model.config.d_model)),
        betas=cfg.adam_betas, eps=cfg.adam_eps, weight_decay=cfg.weight_decay)
    writer = ModelWriter(run_dir, built, config=stored_config(
        cfg, resumed=resumed, precision=precision, inputs=inputs, built=built,
        extra={**(extra_config or {}), **built.extra_config}))
    with training_run(model=model, task=task, optimizer=optimizer, scheduler=scheduler,
                      data=inputs.data, loop=cfg.loop_config(precision.precision),
                      run_dir=run_dir, tensorboard=cfg.tensorboard, precision=precision,
                      save_best=writer.save, device=dev, progress=progress,
                      resume=resume) as (trainer, result):
        summary = summarize(result, run_dir=run_dir, model=model, cfg=cfg,
                            train_pairs=inputs.train_pairs, precision=precision)
        if cfg.average_last and info.is_main:
            summary["average"] = try_average(cfg, trainer, result, run_dir, writer.save)
    D.barrier()
    return {**summary, "device": str(dev), "world_size": info.world_size}


def _log_model(cfg: TranslationTrainConfig, model: Transformer) -> None:
    """One log line: the model's size, preset, shape and vocabularies."""
    shape = model.config
    log.info("model: %s parameters (%s preset, d_model=%d, %d+%d layers), vocabularies %d/%d",
             f"{model.num_parameters():,}", cfg.preset, shape.d_model, shape.num_encoder_layers,
             shape.num_decoder_layers, shape.src_vocab_size, shape.tgt_vocab_size)


# --- the data and the task ------------------------------------------------------------------------


def setup_data(cfg: TranslationTrainConfig, built: TranslationModel,
               source: TranslationSource) -> TranslationInputs:
    """This rank's training batches, and on rank 0 the validation batches and BLEU sample, from
    ``source`` with the model's tokenizers, fitted to the model's positions."""
    info = D.current()
    return source.inputs(cfg, src_tokenizer=built.src_tokenizer, tgt_tokenizer=built.tgt_tokenizer,
                         max_len=built.model.config.max_len, rank=info.rank,
                         world_size=info.world_size, validation=info.is_main)


def setup_task(cfg: TranslationTrainConfig, built: TranslationModel,
               inputs: TranslationInputs) -> TranslationTask:
    """The loss (label-smoothed) and validation (loss, BLEU/chrF on the sample) of the run."""
    return TranslationTask(
        metric=cfg.metric, tgt_tokenizer=built.tgt_tokenizer, valid_batches=inputs.valid_batches,
        bleu_sources=inputs.bleu_sources, metrics=cfg.valid_metrics,
        bleu_references=inputs.bleu_references, label_smoothing=cfg.label_smoothing,
        pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID, max_len_a=cfg.decode_max_len_a,
        max_len_b=cfg.decode_max_len_b,
    )


# --- the model directory --------------------------------------------------------------------------


def stored_config(cfg: TranslationTrainConfig, *, resumed: RunRecord | None,
                  precision: PrecisionChoice, inputs: TranslationInputs,
                  built: TranslationModel, extra: dict[str, Any]) -> dict[str, Any]:
    """``config.json`` but the model's shape (which :func:`save_model_dir` adds): the task, the
    training configuration, the precision, where the data came from, the tokenizers' settings
    and the ``extra`` sections. A ``resumed`` run keeps what it stored when it started (data
    sizes, extra sections) with the configuration and precision it continues with."""
    if resumed is not None:
        stored = {**resumed.to_dict(), "training": cfg.to_dict(),
                  "precision": precision.to_dict()}
        stored.pop("model", None)
        return stored
    return {
        "task": "translation",
        "training": cfg.to_dict(),
        "precision": precision.to_dict(),
        "data": inputs.record,
        "tokenizer": {"vocab_size": cfg.vocab_size, "joint": cfg.joint, "model_type": cfg.model_type,
                      "src_vocab_size": built.src_tokenizer.vocab_size,
                      "tgt_vocab_size": built.tgt_tokenizer.vocab_size},
        **extra,
    }


class ModelWriter:
    """Writes the run's model directory: ``config`` (see :func:`stored_config`), the weights of
    the model given and the tokenizers; the Trainer's ``save_best``."""

    def __init__(self, run_dir: Path, built: TranslationModel, *, config: dict[str, Any]) -> None:
        self.run_dir = run_dir
        self.config = config
        self.tokenizers = built.src_tokenizer, built.tgt_tokenizer

    def save(self, model: torch.nn.Module, evaluation: dict[str, Any] | None) -> None:
        """Write ``model`` with its validation figures (``best_validation``; None: not validated)."""
        config = self.config if evaluation is None else {**self.config, "best_validation": evaluation}
        save_model_dir(self.run_dir, model, config=config, src_tokenizer=self.tokenizers[0],
                       tgt_tokenizer=self.tokenizers[1])


# --- the end of a run -----------------------------------------------------------------------------


def try_average(cfg: TranslationTrainConfig, trainer: Trainer, result: TrainResult, run_dir: Path,
                save_best: Callable[[torch.nn.Module, dict[str, Any]], None]) -> dict[str, Any] | None:
    """Average the snapshots of the last ``cfg.average_last`` evaluations into the model and
    validate it; it becomes the run's model (``save_best`` writes it) when its metric beats the
    best single model's. Returns the ``average`` record of ``metrics.jsonl``, None without an average.

    The model is left holding the average (the checkpoint keeps the last weights for a resume).
    """
    from transformer.training.average import average_weights
    from transformer.training.checkpoint import list_snapshots

    snapshots = list_snapshots(run_dir)[-cfg.average_last:]
    if len(snapshots) < 2:
        return None
    average_weights(trainer.model, [path for _, path in snapshots])
    with trainer.autocast():
        evaluation = trainer.task.evaluate(trainer.model)
    if evaluation is None:
        return None
    metric = cfg.metric if cfg.metric in evaluation else "loss"
    value, best = float(evaluation[metric]), result.best_metric
    better = best is None or (value < best if metric == "loss" else value > best)
    steps = [step for step, _ in snapshots]
    record = {"kind": "average", "step": result.steps, "snapshots": steps, "kept": better,
              **{k: float(v) for k, v in evaluation.items()}}
    trainer.write_metrics(record)
    log.info("average of the snapshots of updates %s: %s %.4g (best single model %s)%s",
             steps, metric, value, "none" if best is None else f"{best:.4g}",
             "; it becomes the model" if better else "; the best single model stays")
    if better:
        save_best(trainer.model, {**evaluation, "averaged_steps": steps})
    return record


def summarize(result: TrainResult, *, run_dir: Path, model: Transformer,
              cfg: TranslationTrainConfig, train_pairs: int,
              precision: PrecisionChoice) -> dict[str, Any]:
    """The JSON summary ``transformer train --json`` prints (but the device and world size)."""
    return {
        **run_summary(result, run_dir=run_dir, model=model, precision=precision),
        "preset": cfg.preset,
        "train_pairs": train_pairs,
        "train_s": round(result.elapsed_s, 2),
        "tokens_per_s": round(result.tokens_per_s, 1),
        "metric": cfg.metric,
        "best_metric": result.best_metric,
        "last_validation": result.last_eval,
    }


@dataclass
class TranslationRecipe:
    """The translation task's stages for :mod:`~transformer.training.run_lifecycle`: train into
    ``run_dir`` on ``device`` (from ``init_from``'s weights when given)."""

    run_dir: Path
    device: str = "auto"
    progress: bool = False
    init_from: Path | str | None = None
    kind: lifecycle.RunKind = lifecycle.TRANSLATION

    def start(self, cfg: TranslationTrainConfig) -> dict[str, Any]:
        return train_translation(cfg, run_dir=self.run_dir, device=self.device,
                                 progress=self.progress, init_from=self.init_from)

    def resume(self, cfg: TranslationTrainConfig, record: RunRecord) -> dict[str, Any]:
        return train_translation(cfg, run_dir=self.run_dir, device=self.device,
                                 progress=self.progress, resumed=record)

    def check_same_data(self, record: RunRecord) -> None:
        """A translation run's data is its configuration's (compared already)."""


def start_translation(cfg: TranslationTrainConfig, *, run_dir: Path | str, overwrite: bool = False,
                      device: str = "auto", progress: bool = False,
                      init_from: Path | str | None = None) -> dict[str, Any]:
    """``transformer train``: hold ``run_dir``'s lock, refuse (or with ``overwrite`` clear) a model
    already there, then :func:`train_translation` (from ``init_from``'s weights when given)."""
    recipe = TranslationRecipe(Path(run_dir), device=device, progress=progress, init_from=init_from)
    return lifecycle.start_run(recipe, cfg, overwrite=overwrite)


def resume_translation(run_dir: Path | str, *, device: str = "auto", progress: bool = False,
                       **stop: Any) -> dict[str, Any]:
    """Continue the run in ``run_dir`` exactly, holding its lock; ``stop`` may change epochs,
    max_steps, minutes or patience (e.g. a larger budget), save_every, save_minutes,
    max_bad_updates or tensorboard."""
    recipe = TranslationRecipe(Path(run_dir), device=device, progress=progress)
    return lifecycle.resume_run(recipe, **stop)


def train_or_resume_translation(cfg: TranslationTrainConfig, *, run_dir: Path | str,
                                device: str = "auto", progress: bool = False,
                                init_from: Path | str | None = None) -> dict[str, Any]:
    """``transformer train --resume auto``: resume ``run_dir`` when it holds a checkpoint of
    ``cfg``'s run, else train ``cfg`` from the start
    (:func:`~transformer.training.run_lifecycle.start_or_resume`)."""
    recipe = TranslationRecipe(Path(run_dir), device=device, progress=progress, init_from=init_from)
    return lifecycle.start_or_resume(recipe, cfg)
