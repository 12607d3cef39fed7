"""One memory job as the ``memory`` verb asks for it: the batch (rows, or a token budget), then the
seed tutorial's formula for a decoder-only model, or this package's estimate and, when asked, the
measurement of real steps beside it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from transformer.config import ModelConfig
from transformer.memory.estimate import MemoryEstimate, estimate_training_memory
from transformer.memory.gpt2_formula import seed_formula_estimate
from transformer.memory.measure import MeasuredPeak, measure_training_peak
from transformer.memory.report import format_report
from transformer.memory.setting import FP32, TrainingStep, batch_for_tokens

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemoryResult:
    """The estimate, and the measured peak when one was taken."""

    estimate: MemoryEstimate
    measured: MeasuredPeak | None = None

    def to_dict(self) -> dict[str, Any]:
        out = self.estimate.to_dict()
        if self.measured is not None:
            out["measured"] = self.measured.to_dict()
            out["ratio"] = self.estimate.peak_bytes / max(self.measured.peak_bytes, 1)
        return out

    def format(self) -> str:
        return format_report(self.estimate, self.measured)


def memory_job(
    config: ModelConfig,
    step: TrainingStep,
    *,
    max_tokens: int | None = None,
    device: str = "cpu",
    decoder_only: bool = False,
    decoder_only_d_ff: int | None = None,
    measure: bool = False,
) -> MemoryResult:
    """Estimate (and with ``measure`` also measure on ``device``) the training ``step`` of
    ``config``.

    ``max_tokens``, when given, replaces the step's ``batch_size`` by the rows that fill that many padded
    positions. ``decoder_only`` applies the seed tutorial's GPT-2 formula to the decoder's depth,
    heads, width and target vocabulary, with ``decoder_only_d_ff`` (default 4 x d_model, as GPT-2)
    and ``tgt_len`` (else ``src_len``) as the sequence length; it cannot be measured.
    Raises ``ValueError`` naming a bad value or combination.
    """
    if decoder_only:
        if measure:
            raise ValueError("--measure needs an encoder-decoder or --encoder-only model; "
                             "--decoder-only is the seed's formula only")
        seq_len = step.tgt_len or step.src_len
        batch_size = step.batch_size
        if max_tokens:
            batch_size = batch_for_tokens(max_tokens, src_len=seq_len, tgt_len=None,
                                          encoder_only=True)
        return MemoryResult(seed_formula_estimate(
            num_layers=config.num_decoder_layers, num_heads=config.num_heads,
            d_model=config.d_model, d_ff=decoder_only_d_ff or 4 * config.d_model,
            vocab_size=config.tgt_vocab_size, batch_size=batch_size, seq_len=seq_len,
            bytes_per_value=FP32 if step.precision == "fp32" else FP32 // 2))
    if max_tokens:
        step = replace(step, batch_size=batch_for_tokens(
            max_tokens, src_len=step.src_len, tgt_len=step.tgt_len, encoder_only=step.encoder_only))
    estimate = estimate_training_memory(config, step, device=device)
    if not measure:
        return MemoryResult(estimate)
    log.info("measuring two training steps on %s ...", device)
    return MemoryResult(estimate, measure_training_peak(config, step, device=device))
