"""Measuring the peak memory of real training steps.

:func:`measure_training_peak` runs real steps and reports the peak: ``torch.cuda`` peak allocated
bytes on a GPU, and on the CPU the peak of live tensor storage tracked by :class:`LiveTensorBytes`
(a ``TorchDispatchMode`` that sees every tensor an operator returns, forward and backward, and a
weak reference to each storage that tells when it is freed).
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from transformer.config import ModelConfig
from transformer.config.field_error import ConfigError, Field
from transformer.memory.setting import TrainingStep


class LiveTensorBytes(TorchDispatchMode):
    """Tracks the bytes of live tensor storage while active, and their peak.

    Every tensor an operator returns (forward, backward and optimizer alike) has its storage
    counted once, until a weak reference reports the storage freed; storages that exist before
    (weights, optimizer state, the batch) are added with :meth:`track`. Views share their base's
    storage and count nothing. Scratch memory inside a single kernel is not seen, so on the CPU this
    is the peak of tensors, the counterpart of ``torch.cuda.max_memory_allocated``.
    ``phase`` names the part of the step under way; ``phase_peaks`` keeps each part's peak.
    """

    def __init__(self) -> None:
        super().__init__()
        self.current = 0
        self.peak = 0
        self.phase = "setup"
        self.phase_peaks: dict[str, int] = {}
        self._sizes: dict[int, int] = {}
        self._refs: dict[int, weakref.ref] = {}

    def track(self, tensor: Any) -> None:
        """Count ``tensor``'s storage (once) until it is freed; non-tensors are ignored."""
        if not isinstance(tensor, torch.Tensor) or tensor.device.type == "meta":
            return
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse or other storage-less tensors
            return
        key = storage._cdata
        if key in self._sizes:
            return
        size = storage.nbytes()
        self._sizes[key] = size
        self._refs[key] = weakref.ref(storage, lambda _ref, key=key: self._free(key))
        self.current += size
        self.peak = max(self.peak, self.current)
        self.phase_peaks[self.phase] = max(self.phase_peaks.get(self.phase, 0), self.current)

    def _free(self, key: int) -> None:
        self.current -= self._sizes.pop(key, 0)
        self._refs.pop(key, None)

    def set_phase(self, name: str) -> None:
        self.phase = name
        self.phase_peaks[name] = max(self.phase_peaks.get(name, 0), self.current)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for item in tree_flatten(out)[0]:
            self.track(item)
        return out


@dataclass(frozen=True)
class MeasuredPeak:
    """The peak bytes of a measured training step, overall and per phase."""

    peak_bytes: int
    phase_peaks: dict[str, int]
    device: str
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {"peak_bytes": self.peak_bytes, "phase_peaks": dict(self.phase_peaks),
                "device": self.device, "method": self.method}


class _Phases:
    """Marks forward / backward / optimizer phases on the CPU tracker or the CUDA allocator."""

    def __init__(self, device: torch.device, tracker: LiveTensorBytes | None) -> None:
        self.device, self.tracker = device, tracker
        self.peaks: dict[str, int] = {}
        self._name: str | None = None

    def mark(self, name: str | None) -> None:
        if self.tracker is not None:
            if name is not None:
                self.tracker.set_phase(name)
            return
        torch.cuda.synchronize(self.device)
        if self._name is not None:
            self.peaks[self._name] = torch.cuda.max_memory_allocated(self.device)
        if name is not None:
            torch.cuda.reset_peak_memory_stats(self.device)
        self._name = name


def measure_training_peak(config: ModelConfig, step: TrainingStep, *, device: str = "cpu",
                          seed: int = 0) -> MeasuredPeak:
    """Build the model, run two training steps on a random batch and report the second's peak.

    A step is what the trainer does: forward and loss under autocast (``bf16``/``fp16``),
    backward (through a grad scaler for ``fp16``), gradient clipping, an Adam step with the
    paper's betas and ``zero_grad(set_to_none=True)``. The loss is the label-smoothed
    cross-entropy for translation and plain cross-entropy for a classifier. The first step creates
    Adam's moments, so the second is the steady state (with ``fp16``, steps the grad scaler skips
    for overflow count as neither: they never reach Adam). On CUDA the peak is
    ``torch.cuda.max_memory_allocated``; on the CPU it is :class:`LiveTensorBytes`'s.
    """
    dev = torch.device(device)
    tgt_len = step.check(config, device=dev.type)
    batch_size, src_len, precision = step.batch_size, step.src_len, step.precision
    encoder_only, num_labels, pooling = step.encoder_only, step.num_labels, step.pooling
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(Field("device"), " 'cuda' requested but CUDA is not available")
    if precision == "fp16" and dev.type != "cuda":
        raise ConfigError(Field("precision"), " 'fp16' needs a CUDA device; use 'bf16' on the CPU")

    generator = torch.Generator().manual_seed(seed)
    model = _seeded_model(config, encoder_only=encoder_only, num_labels=num_labels,
                          pooling=pooling, seed=seed, device=dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    batch = _random_batch(config, generator, batch_size=batch_size, src_len=src_len,
                          tgt_len=tgt_len, encoder_only=encoder_only, num_labels=num_labels,
                          device=dev)
    run = _TrainStep(model, optimizer, torch.amp.GradScaler("cuda") if precision == "fp16" else None,
                     batch, config=config, encoder_only=encoder_only,
                     label_smoothing=step.label_smoothing, precision=precision, device_type=dev.type)
    run.until_stepped(None)  # creates Adam's moments
    if dev.type == "cuda":
        phases = _Phases(dev, None)
        run.until_stepped(phases)
        peak = max(phases.peaks.values())
        return MeasuredPeak(peak, phases.peaks, "cuda", "torch.cuda.max_memory_allocated")
    tracker = LiveTensorBytes()
    for tensor in [*model.parameters(), *model.buffers(), *batch]:
        tracker.track(tensor)
    for state in optimizer.state.values():
        for value in state.values():
            tracker.track(value)
    with tracker:
        phases = _Phases(dev, tracker)
        run(phases)
    peaks = {k: v for k, v in tracker.phase_peaks.items() if k != "setup"}
    return MeasuredPeak(tracker.peak, peaks, "cpu", "live tensor storage (TorchDispatchMode)")


def _seeded_model(config: ModelConfig, *, encoder_only: bool, num_labels: int, pooling: str,
                  seed: int, device: torch.device) -> torch.nn.Module:
    """A ``Transformer`` (or ``TransformerClassifier``) initialised from ``seed`` without touching
    the caller's random state, on ``device`` in training mode."""
    from transformer.model import Transformer, TransformerClassifier

    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        if encoder_only:
            model: torch.nn.Module = TransformerClassifier(config, num_labels=num_labels,
                                                           pooling=pooling)
        else:
            model = Transformer(config)
    return model.to(device).train()


def _random_batch(config: ModelConfig, generator: torch.Generator, *, batch_size: int,
                  src_len: int, tgt_len: int, encoder_only: bool, num_labels: int,
                  device: torch.device) -> list[torch.Tensor]:
    """A batch of random ids with no padding, on ``device``: ``[src (B, S), labels (B,)]`` for a
    classifier, ``[src (B, S), tgt_in (B, T), tgt_out (B, T)]`` for translation."""
    low = 4  # ids above the special ones, so no position is padding
    src = torch.randint(low, config.src_vocab_size, (batch_size, src_len), generator=generator)
    if encoder_only:
        labels = torch.randint(0, num_labels, (batch_size,), generator=generator)
        return [src.to(device), labels.to(device)]
    tgt = torch.randint(low, config.tgt_vocab_size, (batch_size, tgt_len + 1),
                        generator=generator)
    return [src.to(device), tgt[:, :-1].contiguous().to(device), tgt[:, 1:].contiguous().to(device)]


class _TrainStep:
    """One training step as the trainer takes it, on a fixed batch; called with :class:`_Phases`
    it marks the forward pass, the backward pass and the optimizer step as they begin."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 scaler: torch.amp.GradScaler | None, batch: list[torch.Tensor], *,
                 config: ModelConfig, encoder_only: bool, label_smoothing: float,
                 precision: str, device_type: str) -> None:
        self.model, self.optimizer, self.scaler, self.batch = model, optimizer, scaler, batch
        self.config, self.encoder_only = config, encoder_only
        self.label_smoothing = label_smoothing
        self.precision, self.device_type = precision, device_type

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.precision == "fp32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
        return torch.autocast(device_type=self.device_type, dtype=dtype)

    def _loss(self) -> torch.Tensor:
        import torch.nn.functional as F

        from transformer.training.loss import label_smoothed_cross_entropy

        model, batch = self.model, self.batch
        if self.encoder_only:
            return F.cross_entropy(model(batch[0]), batch[1], reduction="sum")
        return label_smoothed_cross_entropy(
            model(batch[0], batch[1]), batch[2], smoothing=self.label_smoothing,
            ignore_index=self.config.pad_id)

    def until_stepped(self, phases: _Phases | None, tries: int = 32) -> None:
        """Take steps until one reaches the optimizer: fp16's grad scaler skips a step whose
        gradients overflow (the first few, while it lowers its scale from 2**16), and a skipped
        step neither creates Adam's moments nor runs its update, so its peak is not the step's.
        ``phases`` is given to each try, so a measured peak is the last (stepped) try's."""
        for _ in range(tries):
            scale = self.scaler.get_scale() if self.scaler is not None else None
            self(phases)
            if scale is None or self.scaler.get_scale() >= scale:
                return
        raise RuntimeError(f"the grad scaler skipped {tries} steps in a row: gradients overflow")

    def __call__(self, phases: _Phases | None) -> None:
        mark = phases.mark if phases is not None else _no_mark
        scaler, optimizer = self.scaler, self.optimizer
        mark("forward")
        with self._autocast():
            loss = self._loss()
        mark("backward")
        (scaler.scale(loss) if scaler is not None else loss).backward()
        del loss
        mark("optimizer")
        if scaler is not None:
            scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        mark(None)


def _no_mark(name: str | None) -> None:
    """The first step's stand-in for :meth:`_Phases.mark`: nothing to mark."""
