"""The setting of one training step, shared by the estimate and the measurement: bytes per value,
the step itself (:class:`TrainingStep`) and its check, and the rows of a token-budgeted batch."""

from __future__ import annotations

from dataclasses import dataclass

from transformer.config import ModelConfig
from transformer.config.choices import DEVICES, POOLING, PRECISIONS, check_choice
from transformer.config.field_error import ConfigError, Field

FP32 = 4  # bytes of a float32 value
INT64 = 8  # bytes of a token id


@dataclass(frozen=True)
class TrainingStep:
    """One training step to size, what the estimate, the measurement and the ``memory`` verb share:
    a batch of ``batch_size`` rows of ``src_len`` source tokens and ``tgt_len`` target tokens
    (None: ``src_len``; BOS included), without padding, in ``precision`` (``fp32``, ``bf16``
    autocast, ``fp16`` autocast with a grad scaler); ``encoder_only``: a ``TransformerClassifier``
    with ``num_labels`` and ``pooling``; ``label_smoothing`` of the translation loss. Checked
    against a model by :meth:`check`, not when made."""

    batch_size: int
    src_len: int
    tgt_len: int | None = None
    precision: str = "fp32"
    encoder_only: bool = False
    num_labels: int = 2
    pooling: str = "mean"
    label_smoothing: float = 0.1

    def check(self, config: ModelConfig, *, device: str) -> int:
        """Check the step for ``config`` on ``device`` (a device type, ``cuda`` or ``cpu``) and
        return its ``tgt_len`` (``src_len`` when None). Raises ``ValueError`` naming the bad
        value: a precision, device or pooling outside their choices, a non-positive batch size or
        length, or a length over the model's ``max_len`` (one less for a classifier's CLS
        position)."""
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("device", device, DEVICES)
        check_choice("pooling", self.pooling, POOLING)
        tgt_len = self.src_len if self.tgt_len is None else self.tgt_len
        for name, value in (("batch_size", self.batch_size), ("src_len", self.src_len),
                            ("tgt_len", tgt_len)):
            if not isinstance(value, int) or value < 1:
                raise ConfigError(Field(name), f" must be a positive integer, got {value!r}")
        longest = config.max_len - (1 if self.encoder_only and self.pooling == "cls" else 0)
        if self.src_len > longest:
            raise ConfigError(Field("src_len"), f"={self.src_len} exceeds the model's ",
                              Field("max_len"), f"={longest}")
        if not self.encoder_only and tgt_len > config.max_len:
            raise ConfigError(Field("tgt_len"), f"={tgt_len} exceeds the model's ", Field("max_len"),
                              f"={config.max_len}")
        return tgt_len


def batch_for_tokens(max_tokens: int, *, src_len: int, tgt_len: int | None,
                     encoder_only: bool = False) -> int:
    """Rows of a batch that spends ``max_tokens`` padded positions as
    :class:`~transformer.data.token_batch_sampler.TokenBatchSampler` counts them: ``rows * width`` with
    ``width = max(src_len + 1, tgt_len)`` (``tgt_len`` includes BOS), or ``src_len`` alone for an
    encoder-only model."""
    width = src_len if encoder_only else max(src_len + 1, src_len if tgt_len is None else tgt_len)
    if max_tokens < width:
        raise ConfigError(Field("max_tokens"), f"={max_tokens} is smaller than one row of {width} tokens")
    return max_tokens // width
