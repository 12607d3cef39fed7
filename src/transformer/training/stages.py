"""The stages both training recipes share, :func:`~transformer.training.train_translation.train_translation`
and :func:`~transformer.training.train_classifier.train_classifier`. Each recipe reads as its
stages in order; these are the ones that are the same for both:

    seed_everything(cfg.seed)                                    # transformer.training.rng
    model = ...                                                  # the recipe's: tokenizer and model
    precision = setup_precision(cfg.precision, model=model, device=device)
    data, task = ...                                             # the recipe's: batches, validation
    optimizer, scheduler = setup_optimizer(model, schedule=LRSchedule(...), weight_decay=...)
    with training_run(model=model, task=task, ..., save_best=writer.save) as (trainer, result):
        ...                                                      # what logs after: an average
    summary = {**run_summary(result, run_dir=run_dir, model=model, precision=precision), ...}
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

from transformer.model import Transformer, TransformerClassifier
from transformer.precision import PrecisionChoice, precision_for_model
from transformer.training import distributed as D
from transformer.training.loop_state import EpochData, LoopConfig, TrainResult
from transformer.training.metrics_file import MetricsLog
from transformer.training.optimizer import ADAM_BETAS, ADAM_EPS, build_optimizer
from transformer.training.schedule import LRSchedule, build_scheduler
from transformer.training.task import Task
from transformer.training.trainer import Trainer

log = logging.getLogger(__name__)


def setup_precision(requested: str, *, model: nn.Module, device: torch.device | str,
                    previous: Mapping[str, Any] | None = None) -> PrecisionChoice:
    """The training precision ``requested`` (auto, fp32, bf16, fp16) resolved for ``model`` on
    ``device``, logged. Under ``torchrun`` rank 0 probes and every rank takes its choice.
    ``previous``: the choice a resumed run stored when it started (see ``precision_for_model``)."""
    info = D.current()
    precision = None
    if info.is_main:  # one probe, one choice for every rank
        precision = precision_for_model(requested, model=model, device=device, training=True,
                                      previous=previous)
    if info.is_distributed:
        precision = D.broadcast_object(precision)
    assert precision is not None
    log.info("%s%s", precision.describe(),
             f"; {precision.probe.describe()}" if precision.probe is not None else "")
    if precision.warning:
        log.warning(precision.warning)
    return precision


def setup_optimizer(model: nn.Module, *, schedule: LRSchedule, weight_decay: float,
                    betas: tuple[float, float] = ADAM_BETAS, eps: float = ADAM_EPS,
                    ) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """Adam (AdamW with ``weight_decay``) over ``model``'s parameters, and the scheduler that sets
    its learning rate by ``schedule`` at every update."""
    optimizer = build_optimizer(model, betas=betas, eps=eps, weight_decay=weight_decay)
    return optimizer, build_scheduler(optimizer, schedule=schedule)


def metrics_log(run_dir: Path, *, tensorboard: bool, precision: PrecisionChoice) -> MetricsLog:
    """Where the run's records go: ``run_dir/metrics.jsonl`` and, with ``tensorboard``, on rank 0
    its TensorBoard event files with the ``precision`` chosen and the machine as text. Use it as
    a context manager around the training and whatever logs after it (an average)."""
    notes = {}
    if tensorboard and D.current().is_main:
        from transformer.hardware import detect

        notes = {"precision": precision.describe(), "machine": detect().summary()}
    return MetricsLog(run_dir, tensorboard=tensorboard and D.current().is_main, notes=notes)


def train(*, model: nn.Module, task: Task, optimizer: torch.optim.Optimizer,
          scheduler: torch.optim.lr_scheduler.LRScheduler, data: EpochData, loop: LoopConfig,
          run_dir: Path, save_best: Callable[[nn.Module, dict[str, float]], None],
          device: torch.device | str, progress: bool, resume: bool = False,
          metrics: MetricsLog | None = None) -> tuple[Trainer, TrainResult]:
    """Train ``model`` on ``data`` with the ``loop`` settings until the budget is used (with
    ``resume`` from ``run_dir``'s checkpoint); ``save_best`` writes each better model, ``metrics``
    (:func:`metrics_log`; default: ``metrics.jsonl`` alone) takes the records. Returns the Trainer
    (its model holds the last weights) and what it reports."""
    trainer = Trainer(model=model, task=task, optimizer=optimizer, scheduler=scheduler,
                      train_data=data, config=loop, run_dir=run_dir, save_best=save_best,
                      device=device, progress=progress, metrics=metrics)
    return trainer, trainer.fit(resume=resume)


@contextmanager
def training_run(*, model: nn.Module, task: Task, optimizer: torch.optim.Optimizer,
                 scheduler: torch.optim.lr_scheduler.LRScheduler, data: EpochData,
                 loop: LoopConfig, run_dir: Path, tensorboard: bool, precision: PrecisionChoice,
                 save_best: Callable[[nn.Module, dict[str, float] | None], None],
                 device: torch.device | str, progress: bool,
                 resume: bool) -> Iterator[tuple[Trainer, TrainResult]]:
    """The training of a run, as both recipes start it: a fresh run first writes its model
    directory on rank 0 (``save_best(model, None)``: complete from the start, so resume and the
    other verbs can read it), every rank waits for it, then :func:`train` runs inside
    :func:`metrics_log`, which stays open in the block for what logs after (an average). Yields
    :func:`train`'s (Trainer, TrainResult)."""
    if D.current().is_main and not resume:
        save_best(model, None)
    D.barrier()
    with metrics_log(run_dir, tensorboard=tensorboard, precision=precision) as metrics:
        yield train(model=model, task=task, optimizer=optimizer, scheduler=scheduler, data=data,
                    loop=loop, run_dir=run_dir, save_best=save_best, device=device,
                    progress=progress, resume=resume, metrics=metrics)


def run_summary(result: TrainResult, *, run_dir: Path, model: Transformer | TransformerClassifier,
                precision: PrecisionChoice) -> dict[str, Any]:
    """The part of a recipe's JSON summary both recipes report: where the model is, its size, how
    far the run went, why it stopped, the update of the best model and the precision it ran in."""
    return {
        "run_dir": str(run_dir),
        "parameters": model.num_parameters(),
        "steps": result.steps,
        "epochs": result.epochs,
        "stopped_by": result.stopped_by,
        "best_step": result.best_step,
        "precision": precision.precision,
    }
