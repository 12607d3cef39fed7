"""The training loop: one class that reads in one sitting.

A :class:`Trainer` runs optimizer updates of ``accumulate`` micro-batches each until ``epochs``,
``max_steps`` or the wall-clock budget ``minutes`` is reached (or early stopping fires). Before every
scheduler step it tells the schedule the share of the budget used so far (:meth:`budget_used`), so a
cool-down placed by the budget follows the time left on a time budget. A ``minutes`` budget keeps
the time of the evaluations that follow the stop in reserve, so they end within it too. Every
``eval_every`` updates it evaluates through the :class:`~transformer.training.task.Task`, keeps the
best model (by the task's metric) through the ``save_best`` callback, and writes a checkpoint that
:meth:`Trainer.fit` with ``resume=True`` continues from exactly: weights, optimizer, scheduler,
grad scaler, RNG states of every rank and the data position (epoch and batch index within that
epoch's deterministic batch order). Every logged step and evaluation is a line of
``RUN_DIR/metrics.jsonl``.

The loss of an update is summed over all micro-batches (and all ranks) and divided by their total
normaliser (target tokens), so accumulating k micro-batches, or splitting a batch over k ranks,
makes the same update as one batch k times larger.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from transformer.errors import RunStopped
from transformer.model_dir import unwrap
from transformer.training import budget as B
from transformer.training import distributed as D
from transformer.training.exact_resume import restore_trainer, write_trainer_checkpoint
from transformer.training.loop_state import EpochData, LoopConfig, TrainResult, TrainState
from transformer.training.metrics_file import MetricsLog
from transformer.training.model_selection import record_evaluation
from transformer.training.preemption import Preemption, exit_status
from transformer.training.rng import seed_everything
from transformer.training.schedule import set_progress
from transformer.training.task import Task
from transformer.training.train_log import (
    progress_bar,
    show_on_bar,
    train_line,
    train_record,
    valid_line,
    valid_record,
)

log = logging.getLogger(__name__)


class Trainer:
    """Trains ``model`` on ``train_data`` with ``task``'s loss; see the module docstring.

    ``model`` must already be on ``device``. In a ``torchrun`` job (process group initialised)
    it is wrapped in DistributedDataParallel and every rank must be given its own shard of
    batches. ``save_best(model, evaluation)`` is called on rank 0 with the bare model whenever the
    metric improves (and at the end when there is no validation data). ``run_dir`` receives
    ``metrics.jsonl`` (``metrics``: where the records go, by default that file alone; its owner
    closes it) and ``checkpoint/``; without it nothing is written.
    """

    def __init__(
        self,
        *,
        model: nn.Module,
        task: Task,
        optimizer: torch.optim.Optimizer,
        train_data: EpochData,
        config: LoopConfig,
        scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
        run_dir: Path | str | None = None,
        save_best: Callable[[nn.Module, dict[str, float]], None] | None = None,
        device: torch.device | str | None = None,
        progress: bool = False,
        clock: Callable[[], float] = time.monotonic,
        metrics: MetricsLog | None = None,
    ) -> None:
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        if config.precision == "fp16" and self.device.type != "cuda":
            raise ValueError("precision 'fp16' needs a CUDA device; use 'bf16' on the CPU")
        self.config = config
        self.task = task
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.train_data = train_data
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.metrics = metrics if metrics is not None else MetricsLog(self.run_dir)
        self.save_best = save_best
        self.progress = progress
        self.clock = clock  # seconds; every duration of the loop (budget, cool-down) reads it
        self.dist = D.current()
        self.model = unwrap(model)
        self.train_model: nn.Module = self.model
        if self.dist.is_distributed:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.train_model = nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
        self.scaler = torch.amp.GradScaler("cuda") if config.precision == "fp16" else None
        self.state = TrainState()
        self._bar: Any = None
        self._start = 0.0  # the clock's reading when the run (resumed parts included) began

    # --- one optimizer update ---------------------------------------------------------------------

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.config.precision == "fp32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if self.config.precision == "bf16" else torch.float16
        return torch.autocast(device_type=self.device.type, dtype=dtype)

    def _update(self, group: Sequence[Any]) -> tuple[float, int, int]:
        """Forward/backward every micro-batch of ``group``, then one optimizer and scheduler step.

        Returns this rank's summed loss, normaliser and token count.
        """
        model, opt, scaler = self.train_model, self.optimizer, self.scaler
        model.train()
        local = sum(self.task.normaliser(b) for b in group)
        total = D.all_reduce_sum([local], device=self.device)[0]
        # DDP averages gradients over ranks, so scale by world_size / (global normaliser).
        factor = self.dist.world_size / max(total, 1.0)
        loss_sum = torch.zeros((), device=self.device)
        tokens = 0
        for i, batch in enumerate(group):
            last = i == len(group) - 1
            no_sync = model.no_sync() if self.dist.is_distributed and not last else contextlib.nullcontext()
            batch = batch.to(self.device)
            with no_sync:
                with self.autocast():
                    loss = self.task.loss(model, batch)
                scaled = loss * factor
                (scaler.scale(scaled) if scaler is not None else scaled).backward()
            loss_sum += loss.detach().float()
            tokens += self.task.num_tokens(batch)
        if scaler is not None:
            scaler.unscale_(opt)
        grad_norm = None
        if self.config.clip_norm:
            grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_norm)
        skipped = False
        if scaler is not None:  # the scaler skips non-finite steps itself (and rescales)
            scaler.step(opt)
            scaler.update()
        else:
            skipped = self._non_finite(loss_sum, grad_norm)
            if not skipped:
                opt.step()
        opt.zero_grad(set_to_none=True)
        self._count_skip(skipped)
        return float(loss_sum), local, tokens

    def _non_finite(self, loss_sum: torch.Tensor, grad_norm: torch.Tensor | None) -> bool:
        """Whether this update's loss or gradient holds an inf or NaN, on any rank."""
        if grad_norm is None:
            grads = [p.grad for p in self.model.parameters() if p.grad is not None]
            grad_norm = nn.utils.get_total_norm(grads) if grads else torch.zeros(())
        bad = int(not (torch.isfinite(loss_sum) and torch.isfinite(grad_norm)))
        # DDP's gradients are the same on every rank but the loss is not: agree on the decision
        return bool(D.all_reduce_max([bad], device=self.device)[0])

    def _count_skip(self, skipped: bool) -> None:
        st = self.state
        st.skipped_updates += int(skipped)
        st.bad_in_a_row = st.bad_in_a_row + 1 if skipped else 0

    # --- the loop ---------------------------------------------------------------------------------

    def fit(self, *, resume: bool = False) -> TrainResult:
        """Train until a stop condition; with ``resume`` continue from ``run_dir/checkpoint/``."""
        cfg = self.config
        if resume:
            self._restore()
        else:
            seed_everything(cfg.seed + self.dist.rank)  # dropout differs between ranks
        st = self.state
        clock = self.clock
        start = self._start = clock() - st.elapsed_s
        window = {"loss": 0.0, "norm": 0, "tokens": 0, "t": clock()}
        stopped_by: str | None = None
        plan: Sequence[Any] = ()
        plan_epoch = -1
        n = 1
        last_save = clock()
        with self._progress_bar(), Preemption() as preemption:
            while True:
                stopped_by = self._stop_reason(clock() - start)
                if stopped_by is not None:
                    break
                if plan_epoch != st.epoch:
                    (plan, n), plan_epoch = self.epoch_plan(st.epoch), st.epoch
                first = st.batch_index
                group = [plan[i] for i in range(first, min(n, first + cfg.accumulate))]
                loss, norm, tokens = self._update(group)
                st.step += 1
                st.batch_index = first + len(group)
                if st.batch_index >= n:
                    st.epoch, st.batch_index = st.epoch + 1, 0
                st.elapsed_s = clock() - start
                # the schedule advances over a skipped update too, as it does under fp16's scaler
                self._step_schedule(n)
                if st.bad_in_a_row:
                    self._skipped(loss)
                else:  # a skipped update's NaN would spoil the logged mean
                    window["loss"] += loss
                    window["norm"] += norm
                    window["tokens"] += tokens
                    st.tokens += tokens
                if self._bar is not None:
                    self._bar.update(1)
                if st.step % cfg.log_every == 0:
                    self._log_train(window, n)
                saved = False
                if cfg.eval_every and st.step % cfg.eval_every == 0:
                    self._evaluate_and_save(n)
                    saved = True
                signum, due = self._at_boundary(preemption, clock() - last_save)
                if not saved and (signum or due or (cfg.save_every and st.step % cfg.save_every == 0)):
                    self._checkpoint()
                    saved = True
                if saved:
                    last_save = clock()
                if signum:
                    raise self._preempted(signum)
            if plan_epoch == -1 and st.batch_index:  # resumed and stopped at once: mid-epoch,
                n = self.epoch_plan(st.epoch)[1]     # the epochs done count this epoch's batches
            if st.last_eval_step != st.step:
                self._evaluate_and_save(n)
        assert stopped_by is not None
        if self.dist.is_main:
            log.info("stopped by %s after %d updates (%.1fs)", stopped_by, st.step, st.elapsed_s)
        return TrainResult(
            steps=st.step,
            epochs=self._epochs_done(n),
            elapsed_s=st.elapsed_s,
            stopped_by=stopped_by,
            best_metric=st.best_metric,
            best_step=st.best_step,
            last_eval=dict(st.last_eval),
            tokens_per_s=st.tokens * self.dist.world_size / max(st.elapsed_s, 1e-9),
        )

    def epoch_plan(self, epoch: int) -> tuple[Sequence[Any], int]:
        """Epoch ``epoch``'s batches, and how many of them every rank trains on."""
        plan = self.train_data.for_epoch(epoch)
        # ranks must agree on the number of updates or DDP would wait forever
        n = D.all_reduce_min(len(plan), device=self.device)
        if n == 0:
            raise ValueError(f"no training batches in epoch {epoch}")
        return plan, n

    def _evaluate_and_save(self, n: int) -> None:
        """Evaluate, then write the checkpoint holding how long the evaluation took (the reserve
        a ``minutes`` budget keeps for the evaluations that follow its stop)."""
        began = self.clock()
        self._evaluate(n)
        self.state.eval_s = D.broadcast_float(self.clock() - began, device=self.device)
        self.state.elapsed_s = self.clock() - self._start  # a resume counts the evaluation too
        self._checkpoint()

    def budget_used(self, elapsed: float, batches_per_epoch: int) -> float:
        """The share of the budget used after ``elapsed`` seconds, from 0 to 1
        (:func:`~transformer.training.budget.budget_used`)."""
        return B.budget_used(self.config, self.state, elapsed=elapsed,
                             batches_per_epoch=batches_per_epoch, reserve=self._reserve())

    def eta_s(self, batches_per_epoch: int) -> float | None:
        """Seconds left until the budget (updates, epochs or minutes, whichever ends first) is
        used at the pace so far; None before the first update or without a budget. Early stopping
        (``patience``) may end the run sooner."""
        share = self.budget_used(self.state.elapsed_s, batches_per_epoch)
        return B.eta_s(share=share, elapsed=self.state.elapsed_s)

    def planned_updates(self, batches_per_epoch: int) -> int | None:
        """The updates the run will have made when its budget is used: ``max_steps`` when that
        is the budget, else the updates so far scaled by the share of the budget they used."""
        share = self.budget_used(self.state.elapsed_s, batches_per_epoch)
        return B.planned_updates(share=share, step=self.state.step, max_steps=self.config.max_steps)

    def _reserve(self) -> float:
        """Seconds a ``minutes`` budget keeps for the evaluations that follow the stop."""
        return self.config.end_evals * self.state.eval_s

    def _step_schedule(self, n: int) -> None:
        """Tell the schedule how much of the budget is used (rank 0's clock), then step it."""
        if self.scheduler is None:
            return
        progress = D.broadcast_float(self.budget_used(self.state.elapsed_s, n), device=self.device)
        set_progress(self.scheduler, progress)
        self.scheduler.step()

    def _at_boundary(self, preemption: Preemption, since_save: float) -> tuple[int, bool]:
        """After an update: (a signal received by any rank, or 0; whether rank 0's clock says
        a timed checkpoint is due), the same on every rank."""
        minutes = self.config.save_minutes
        due = int(self.dist.is_main and minutes is not None and since_save >= minutes * 60)
        signum, due = D.all_reduce_max([preemption.requested(), due], device=self.device)
        return signum, bool(due)

    def _preempted(self, signum: int) -> RunStopped:
        name = signal.Signals(signum).name
        where = self.run_dir / "checkpoint" if self.run_dir is not None else "nowhere (no run_dir)"
        log.warning("stopped by %s after update %d; checkpoint written to %s", name,
                    self.state.step, where)
        return RunStopped(f"stopped by {name} after update {self.state.step}; the checkpoint is in "
                          f"{where}", exit_status=exit_status(signum))

    def _skipped(self, loss: float) -> None:
        """Log an update skipped for a non-finite loss or gradient; stop after too many in a row."""
        st, limit = self.state, self.config.max_bad_updates
        self.write_metrics({"kind": "skipped", "step": st.step, "loss": repr(loss),
                            "skipped_updates": st.skipped_updates, "in_a_row": st.bad_in_a_row})
        log.warning("update %d skipped: non-finite loss or gradient (%d in a row, %d in all)",
                    st.step, st.bad_in_a_row, st.skipped_updates)
        if limit and st.bad_in_a_row >= limit:
            where = self.run_dir / "checkpoint" if self.run_dir is not None else "no run_dir"
            raise RunStopped(f"{st.bad_in_a_row} updates in a row had a non-finite loss or gradient "
                             f"(updates {st.step - st.bad_in_a_row + 1}-{st.step}); stopped, the "
                             f"last good checkpoint is kept in {where}")

    def _stop_reason(self, elapsed: float) -> str | None:
        reason = B.stop_reason(self.config, self.state, elapsed=elapsed, reserve=self._reserve())
        # rank 0's clock and early-stopping counters decide for everyone
        code = D.broadcast_int(B.STOP_REASONS.index(reason), device=self.device)
        return B.STOP_REASONS[code]

    # --- logging, evaluation, checkpoints ---------------------------------------------------------

    def _lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def _epochs_done(self, n: int) -> float:
        return round(self.state.epoch + self.state.batch_index / max(n, 1), 4)

    def _log_train(self, window: dict[str, Any], n: int) -> None:
        loss, norm, tokens = D.all_reduce_sum(
            [window["loss"], window["norm"], window["tokens"]], device=self.device
        )
        now = self.clock()
        eta = self.eta_s(n)
        record = train_record(self.state, epoch=self._epochs_done(n), loss=loss / max(norm, 1.0),
                              lr=self._lr(), tokens_per_s=tokens / max(now - window["t"], 1e-9),
                              eta=eta)
        window.update(loss=0.0, norm=0, tokens=0, t=now)
        if self._bar is not None:  # the total the budget allows, at the pace so far
            show_on_bar(self._bar, record, planned=self.planned_updates(n))
        else:
            self._say(train_line(record, config=self.config, eta=eta))
        self.write_metrics(record)

    def _evaluate(self, n: int) -> None:
        """Evaluate on rank 0, keep the best model, update the early-stopping counter."""
        st = self.state
        st.last_eval_step = st.step
        if self.dist.is_main:
            with self.autocast():
                result = self.task.evaluate(self.model)
            better = record_evaluation(st, result, metric=self.task.metric,
                                       higher_is_better=self.task.higher_is_better)
            if better and self.save_best is not None:
                self.save_best(self.model, result if result is not None else {})
            if result is not None:
                self._say(valid_line(st, better=better))
                self.write_metrics(valid_record(st, epoch=self._epochs_done(n), lr=self._lr()))
        D.barrier()

    def _checkpoint(self) -> None:
        write_trainer_checkpoint(self)

    def _restore(self) -> None:
        restore_trainer(self)

    def write_metrics(self, record: dict[str, Any]) -> None:
        if self.run_dir is None or not self.dist.is_main:
            return
        self.metrics.write(record)

    def _say(self, message: str) -> None:
        if not self.dist.is_main:
            return
        if self._bar is not None:
            self._bar.write(message)
        else:
            log.info(message)

    @contextlib.contextmanager
    def _progress_bar(self) -> Iterator[None]:
        with progress_bar(enabled=self.progress and self.dist.is_main,
                          total=self.config.max_steps, initial=self.state.step) as bar:
            self._bar = bar
            try:
                yield
            finally:
                self._bar = None
