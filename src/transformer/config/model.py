"""Model configuration: one frozen dataclass, validated on construction, with the paper's presets.

``base`` and ``big`` are the rows of Table 3 of "Attention Is All You Need"; ``tiny`` and ``small``
are CPU-sized shapes for tests and laptop training.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from transformer.config.choices import ACTIVATIONS, POSITIONAL, POSITIONAL_LAYOUTS, check_choice
from transformer.config.field_error import ConfigError, Field


@dataclass(frozen=True)
class ModelConfig:
    """Shape and options of an encoder-decoder (or encoder-only) Transformer.

    Every deviation from the paper is a flag whose default is the paper's choice: post-LN
    (``norm_first=False``), ReLU, sinusoidal positions, separate embeddings, no dropout on attention
    weights or inside the feed-forward network (the paper applies dropout to each sub-layer output
    and to the embedding sums only), the sinusoidal table with sines and cosines interleaved
    (``positional_layout="halves"``: all sines, then all cosines, as Marian/OPUS-MT models have).
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    num_heads: int = 8
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    max_len: int = 256
    pad_id: int = 0
    norm_first: bool = False
    activation: str = "relu"
    positional: str = "sinusoidal"
    positional_layout: str = "interleaved"
    share_embeddings: bool = False
    tie_embeddings: bool = False
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        def positive(name: str) -> None:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(Field(name), f" must be a positive integer, got {value!r}")

        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "num_heads", "d_ff", "max_len"):
            positive(name)
        if self.num_encoder_layers < 1:
            raise ConfigError(Field("num_encoder_layers"), " must be at least 1, got "
                              f"{self.num_encoder_layers}")
        if self.num_decoder_layers < 0:
            raise ConfigError(Field("num_decoder_layers"), f" must be >= 0, got {self.num_decoder_layers}")
        if self.d_model % self.num_heads != 0:
            raise ConfigError(Field("d_model"), f"={self.d_model} is not divisible by ",
                              Field("num_heads"), f"={self.num_heads}")
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            p = getattr(self, name)
            if not 0.0 <= p < 1.0:
                raise ConfigError(Field(name), f" must be in [0, 1), got {p}")
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ConfigError(Field("pad_id"), f"={self.pad_id} is outside the vocabularies "
                              f"(src {self.src_vocab_size}, tgt {self.tgt_vocab_size})")
        check_choice("activation", self.activation, ACTIVATIONS)
        check_choice("positional", self.positional, POSITIONAL)
        check_choice("positional_layout", self.positional_layout, POSITIONAL_LAYOUTS)
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ConfigError(Field("share_embeddings"), " needs one vocabulary: ",
                              Field("src_vocab_size"), f"={self.src_vocab_size} != ",
                              Field("tgt_vocab_size"), f"={self.tgt_vocab_size}")
        if self.layer_norm_eps <= 0:
            raise ConfigError(Field("layer_norm_eps"), f" must be positive, got {self.layer_norm_eps}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with ``changes`` applied (and validated)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Build from a dict such as ``config.json``'s ``model`` section; unknown keys are an error."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown ModelConfig fields: {', '.join(unknown)}")
        # a file may hold anything: each value must have its field's JSON type (no 0.0 as an id)
        for field in dataclasses.fields(cls):
            if field.name not in data:
                continue
            value = data[field.name]
            kind = int if field.default is dataclasses.MISSING else type(field.default)  # vocab
            ok = (isinstance(value, bool) if kind is bool
                  else isinstance(value, int | float) and not isinstance(value, bool)
                  if kind is float
                  else isinstance(value, int) and not isinstance(value, bool) if kind is int
                  else isinstance(value, kind))
            if not ok:
                raise ConfigError(Field(field.name), f" must be a {kind.__name__}, got {value!r}")
        return cls(**data)

    # Presets. ``vocab_size`` sets both sides at once; any field can be overridden.
    @classmethod
    def _preset(cls, shape: dict[str, Any], vocab_size: int | None, overrides: dict[str, Any]):
        if vocab_size is not None:
            overrides.setdefault("src_vocab_size", vocab_size)
            overrides.setdefault("tgt_vocab_size", vocab_size)
        return cls(**{**shape, **overrides})

    @classmethod
    def tiny(cls, vocab_size: int | None = None, **overrides: Any) -> ModelConfig:
        """A few thousand parameters per layer: for tests and toy tasks."""
        shape = dict(d_model=32, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=64,
                     dropout=0.1, max_len=128)
        return cls._preset(shape, vocab_size, overrides)

    @classmethod
    def small(cls, vocab_size: int | None = None, **overrides: Any) -> ModelConfig:
        """A CPU-sized translator (about 10M parameters with an 8k vocabulary)."""
        shape = dict(d_model=256, num_heads=4, num_encoder_layers=3, num_decoder_layers=3,
                     d_ff=1024, dropout=0.1, max_len=256)
        return cls._preset(shape, vocab_size, overrides)

    @classmethod
    def base(cls, vocab_size: int | None = None, **overrides: Any) -> ModelConfig:
        """Table 3, "base": N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1."""
        shape = dict(d_model=512, num_heads=8, num_encoder_layers=6, num_decoder_layers=6,
                     d_ff=2048, dropout=0.1)
        return cls._preset(shape, vocab_size, overrides)

    @classmethod
    def big(cls, vocab_size: int | None = None, **overrides: Any) -> ModelConfig:
        """Table 3, "big": N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3."""
        shape = dict(d_model=1024, num_heads=16, num_encoder_layers=6, num_decoder_layers=6,
                     d_ff=4096, dropout=0.3)
        return cls._preset(shape, vocab_size, overrides)

    @classmethod
    def preset(cls, name: str, vocab_size: int | None = None, **overrides: Any) -> ModelConfig:
        """A preset by name: ``tiny``, ``small``, ``base`` or ``big``."""
        builders = {"tiny": cls.tiny, "small": cls.small, "base": cls.base, "big": cls.big}
        if name not in builders:
            raise ValueError(f"unknown preset {name!r}; choose from {', '.join(builders)}")
        return builders[name](vocab_size, **overrides)
