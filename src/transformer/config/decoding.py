"""How to decode: the options of one translation call, and their defaults, written once.

    DecodeOptions(beam_size=4, length_penalty=0.6)          # the paper's (section 6.1)
    DecodeOptions(beam_size=1)                               # greedy

Every reader of decoding settings takes its defaults from here: a run's training configuration
(``TranslationTrainConfig.decode_max_len_a/b``), a model directory's record
(``transformer.model_dir.record``), ``translate``, ``evaluate``, ``serve`` and an imported model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# the paper's beam search (section 6.1): beam 4, length penalty alpha 0.6
BEAM_SIZE = 4
LENGTH_PENALTY = 0.6
# a translation is at most a * source tokens + b tokens (fairseq's max_len_a/max_len_b)
MAX_LEN_A = 1.5
MAX_LEN_B = 10


@dataclass(frozen=True)
class DecodeOptions:
    """How to decode. ``beam_size=1`` is greedy decoding. The defaults are the paper's (section
    6.1: beam 4, length penalty 0.6); a translation is at most ``max_len_a * source tokens +
    max_len_b`` tokens (and never more than ``max_len`` or the model's positions). Raises
    ValueError naming a value out of range."""

    beam_size: int = BEAM_SIZE
    length_penalty: float = LENGTH_PENALTY
    nbest: int | None = None
    max_len_a: float | None = MAX_LEN_A
    max_len_b: int = MAX_LEN_B
    max_len: int | None = None
    # word alignments of each translated line (transformer.inference.alignment); the search ignores it
    alignments: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.beam_size, bool) or not isinstance(self.beam_size, int) or self.beam_size < 1:
            raise ValueError(f"beam size must be a positive integer, got {self.beam_size!r}")
        if self.nbest is not None and not 1 <= self.nbest <= self.beam_size:
            raise ValueError(f"nbest must be between 1 and the beam size {self.beam_size}, got {self.nbest}")
        if not math.isfinite(self.length_penalty) or self.length_penalty < 0:
            raise ValueError(f"length penalty must be a non-negative number, got {self.length_penalty}")
        if self.max_len_a is not None and (not math.isfinite(self.max_len_a) or self.max_len_a < 0):
            raise ValueError(f"max_len_a must be a non-negative number, got {self.max_len_a}")
        if self.max_len is not None and self.max_len < 1:
            raise ValueError(f"max_len must be positive, got {self.max_len}")
