"""What the models return when asked for more than logits.

Shapes: B batch, H heads, S source length, T target length, V vocabulary, C labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor


@dataclass
class Attention:
    """Attention weights of every layer, each (B, H, Lq, Lk) with rows summing to 1.

    A query whose every key is padding (a row made only of padding) has all-zero weights.
    """

    encoder: list[Tensor] = field(default_factory=list)  # per layer: (B, H, S, S)
    decoder: list[Tensor] = field(default_factory=list)  # per layer: (B, H, T, T)
    cross: list[Tensor] = field(default_factory=list)  # per layer: (B, H, T, S)


@dataclass
class TransformerOutput:
    logits: Tensor  # (B, T, V) for translation, (B, C) for classification
    attention: Attention
