"""The configuration of each kind of run: translation training and classifier training.

Both are frozen dataclasses that nest the model's shape as a :class:`ModelConfig`; the demo is a
translation run built from the ``demo`` preset. Build them from a preset with
``transformer.config.translation_config`` / ``classifier_config`` / ``demo_config`` (what the
command line does too), or directly, and change them with ``apply_overrides``.

Vocabulary sizes are known only once the tokenizers are trained. The rule: ``vocab_size`` is the
size asked of SentencePiece, and the nested model's ``src_vocab_size``/``tgt_vocab_size`` always
equal it (set on construction); the run replaces both with the tokenizers' real sizes when it
builds the model (``model_config(src_vocab_size=..., tgt_vocab_size=...)``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from transformer.config.choices import (
    CLASSIFIER_SCHEDULES,
    ON_LONG,
    POOLING,
    POS_WEIGHTS,
    TOKENIZER_TYPES,
    TRAINING_PRECISIONS,
    TRANSLATION_CORPORA,
    TRANSLATION_METRICS,
    check_choice,
)
from transformer.config.decoding import MAX_LEN_A, MAX_LEN_B
from transformer.config.field_error import ConfigError, Field
from transformer.config.loop import LoopConfig
from transformer.config.model import ModelConfig
from transformer.config.schedule import check_schedule

STOP_FIELDS = ("epochs", "max_steps", "minutes", "patience")
# what may change on resume: the budget, how often the run saves, how many bad updates it
# tolerates and whether it writes TensorBoard events (none of them changes the weights)
RESUME_FIELDS = (*STOP_FIELDS, "save_every", "save_minutes", "max_bad_updates", "tensorboard")


def _with_vocab(model: ModelConfig, vocab_size: int) -> ModelConfig:
    """``model`` with both vocabularies set to ``vocab_size`` (the requested tokenizer size)."""
    if model.src_vocab_size == vocab_size and model.tgt_vocab_size == vocab_size:
        return model
    return model.replace(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size)


def _concrete(precision: str) -> str:
    """What a loop runs for ``precision``: ``auto`` stands for fp32 until it is resolved on the
    machine (``transformer.precision``), which every training entry point does first."""
    return "fp32" if precision == "auto" else precision


def _translation_model() -> ModelConfig:
    return ModelConfig.small(vocab_size=8000)


def _classifier_model() -> ModelConfig:
    return ModelConfig.small(vocab_size=8000, num_encoder_layers=2, num_decoder_layers=0,
                             max_len=128)


@dataclass(frozen=True)
class _RunConfig:
    """What both kinds of run share: replace, to_dict, from_dict and the vocabulary rule."""

    def _sync_vocab(self) -> None:
        # frozen: the nested model follows vocab_size (see the module docstring)
        object.__setattr__(self, "model", _with_vocab(self.model, self.vocab_size))  # type: ignore[attr-defined]

    def replace(self, **changes: Any) -> Any:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for name, value in out.items():
            if isinstance(value, tuple):
                out[name] = list(value)
        return out

    def model_config(self, *, src_vocab_size: int, tgt_vocab_size: int | None = None) -> ModelConfig:
        """The model to build once the tokenizers are trained: their real vocabulary sizes."""
        return self.model.replace(src_vocab_size=src_vocab_size,  # type: ignore[attr-defined]
                                  tgt_vocab_size=tgt_vocab_size or src_vocab_size)

    @classmethod
    def _fields_from(cls, data: dict[str, Any], what: str) -> dict[str, Any]:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown {what} fields: {', '.join(unknown)}")
        data = dict(data)
        for name in ("adam_betas",):
            if name in data:
                data[name] = tuple(data[name])
        return data


def check_subword_sampling(alpha: float, model_type: str, field: str = "model_type") -> None:
    """ConfigError unless ``alpha`` is 0 (off), or positive with a unigram tokenizer: the
    smoothing of the sampling distribution, ``p(segmentation) ** alpha`` (1: the model's own,
    near 0: nearly uniform over the best segmentations; Kudo 2018 uses 0.1 to 1)."""
    if not isinstance(alpha, (int, float)) or alpha < 0:
        raise ConfigError(Field("subword_sampling"), f" must be 0 (off) or positive, got {alpha!r}")
    if alpha and model_type != "unigram":
        raise ConfigError(Field("subword_sampling"), " samples a unigram tokenizer's "
                          f"segmentations; this run's is {model_type} (", Field(field),
                          " unigram)")


@dataclass(frozen=True)
class TranslationTrainConfig(_RunConfig):
    """A translation run: data, tokenizer, the model's shape (``model``), optimisation, the loop.

    Data: a corpus by name (``data="multi30k"`` with ``src_lang``/``tgt_lang``, or ``"numbers"``,
    the built-in task), explicit parallel files (``train_src``/``train_tgt``, optional
    ``valid_src``/``valid_tgt``, with ``data=None``) or a prepared data directory (``data_dir``,
    with ``data=None``: ``transformer prepare``'s ids, tokenizer and weights). ``preset`` records
    the ModelConfig preset the shape started from (for logs and the summary); ``model`` is the
    shape itself. Presets and recipes (``transformer.config.translation_config``) also fill the
    schedule and the budget.
    """

    # data
    data: str | None = "multi30k"
    src_lang: str = "en"
    tgt_lang: str = "de"
    train_src: str | None = None
    train_tgt: str | None = None
    valid_src: str | None = None
    valid_tgt: str | None = None
    data_dir: str | None = None  # a prepared data directory (transformer prepare) instead of text
    on_long: str = "truncate"
    # tokenizer
    vocab_size: int = 8000
    joint: bool = True
    model_type: str = "bpe"
    byte_fallback: bool = True
    character_coverage: float = 0.9995  # characters kept as pieces; the rarest become bytes or <unk>
    # SentencePiece sampling of the training side, re-encoded each epoch (0: off; unigram: its
    # alpha, bpe: the dropout probability)
    subword_sampling: float = 0.0
    # model
    preset: str = "small"
    model: ModelConfig = field(default_factory=_translation_model)
    # batches and optimisation
    max_tokens: int = 4096  # per micro-batch and rank, padding included
    accumulate: int = 1
    schedule: str = "noam"
    warmup: int = 4000
    lr_scale: float = 1.0  # noam: multiplies equation (3)
    lr: float = 1e-3  # inverse_sqrt: the peak learning rate
    cooldown: int = 0  # linear cool-down over the last N updates before max_steps (0: none)
    # linear cool-down to 0 over the last share of the budget: time, updates or epochs (0: none)
    cooldown_share: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    clip_norm: float | None = 1.0  # 0 means off, stored as None
    precision: str = "auto"  # auto, fp32, bf16, fp16: see transformer.precision
    # the loop
    epochs: int | None = None
    max_steps: int | None = None
    minutes: float | None = None
    eval_every: int = 500
    log_every: int = 50
    patience: int | None = None
    average_last: int = 0  # keep the weights of the last N evaluations; at the end try their mean
    bleu_sample: int = 500  # validation sentences translated for BLEU (0: no BLEU; >= the split: all)
    metric: str = "bleu"  # selects the best model: bleu, chrf or exact_match
    valid_metrics: tuple[str, ...] = TRANSLATION_METRICS  # what validation scores and logs
    decode_max_len_a: float = MAX_LEN_A
    decode_max_len_b: int = MAX_LEN_B
    seed: int = 0
    # robustness: checkpoints between evaluations, and the non-finite update guard
    save_every: int = 0  # a checkpoint every N updates (0: only at evaluations)
    save_minutes: float | None = None  # a checkpoint at least every M minutes
    max_bad_updates: int = 10  # stop after K updates in a row with a non-finite loss/gradient
    tensorboard: bool = False  # the records of metrics.jsonl also as RUN_DIR/tensorboard/ events

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelConfig):
            raise ConfigError(Field("model"), f" must be a ModelConfig, got {type(self.model).__name__}")
        self._sync_vocab()
        if self.clip_norm == 0:
            object.__setattr__(self, "clip_norm", None)
        object.__setattr__(self, "adam_betas", tuple(self.adam_betas))
        if self.data is None and not (self.train_src and self.train_tgt) and not self.data_dir:
            raise ConfigError("give a corpus name (", Field("data"), "), ", Field("train_src"), " and ",
                              Field("train_tgt"), " files or a ", Field("data_dir"))
        if self.data_dir and (self.data is not None or self.train_src or self.train_tgt
                              or self.valid_src or self.valid_tgt):
            raise ConfigError(Field("data_dir"), " holds the training and validation data: give it "
                              "alone, without ", Field("data"), ", ", Field("train_src"), ", ",
                              Field("train_tgt"), ", ", Field("valid_src"), " or ", Field("valid_tgt"))
        if self.data is not None and self.data not in TRANSLATION_CORPORA:
            raise ConfigError(f"unknown corpus {self.data!r} (", Field("data"),
                              f"); known: {', '.join(TRANSLATION_CORPORA)}")
        if bool(self.valid_src) != bool(self.valid_tgt):
            raise ConfigError("give both ", Field("valid_src"), " and ", Field("valid_tgt"), ", or neither")
        for name, least in (("max_tokens", 2), ("vocab_size", 8), ("bleu_sample", 0)):
            if getattr(self, name) < least:
                raise ConfigError(Field(name), f" must be at least {least}, got {getattr(self, name)}")
        check_choice("on_long", self.on_long, ON_LONG)
        check_choice("model_type", self.model_type, TOKENIZER_TYPES)
        if self.average_last == 1 or self.average_last < 0:
            raise ConfigError(Field("average_last"), " must be 0 (off) or at least 2, got "
                              f"{self.average_last}")
        check_choice("metric", self.metric, TRANSLATION_METRICS)
        object.__setattr__(self, "valid_metrics", tuple(self.valid_metrics))
        for name in self.valid_metrics:
            check_choice("valid_metrics", name, TRANSLATION_METRICS)
        if self.metric not in self.valid_metrics:
            raise ConfigError(Field("metric"), f" {self.metric!r} is not among ", Field("valid_metrics"),
                              f" {self.valid_metrics}")
        if not 0.0 < self.character_coverage <= 1.0:
            raise ConfigError(Field("character_coverage"), " must be in (0, 1], got "
                              f"{self.character_coverage}")
        check_subword_sampling(self.subword_sampling, self.model_type)
        if self.subword_sampling and self.data_dir:
            raise ConfigError(Field("subword_sampling"), ": a prepared ", Field("data_dir"),
                              " holds its pairs encoded once; sample from the text it was "
                              "prepared from (", Field("train_src"), "/", Field("train_tgt"), ")")
        check_choice("precision", self.precision, TRAINING_PRECISIONS)
        self.schedule_for(self.model.d_model)
        self.loop_config()

    def schedule_for(self, d_model: int) -> dict[str, Any]:
        """The learning-rate schedule of a model this wide, as ``training.schedule.LRSchedule``'s
        fields (checked here: configuration does not import training)."""
        fields = dict(kind=self.schedule, warmup=self.warmup, d_model=d_model, scale=self.lr_scale,
                      peak_lr=self.lr, cooldown=self.cooldown, total=self.max_steps,
                      cooldown_share=self.cooldown_share)
        check_schedule(**fields)
        return fields

    def loop_config(self, precision: str | None = None) -> LoopConfig:
        """The Trainer's loop settings (:class:`~transformer.config.loop.LoopConfig`); a time
        budget keeps the final evaluation's time, and the average's, in reserve. ``precision``: what runs
        (``self.precision`` resolved on the machine when it is ``auto``)."""
        return LoopConfig(
            epochs=self.epochs, max_steps=self.max_steps, minutes=self.minutes,
            accumulate=self.accumulate, clip_norm=self.clip_norm,
            precision=_concrete(precision or self.precision),
            eval_every=self.eval_every, log_every=self.log_every, patience=self.patience,
            keep_last=self.average_last, seed=self.seed, save_every=self.save_every,
            save_minutes=self.save_minutes, max_bad_updates=self.max_bad_updates,
            end_evals=1 + bool(self.average_last),
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TranslationTrainConfig:
        """Build from ``config.json``'s ``training`` section; unknown keys are an error.

        A section written before the model was nested holds ``model`` as the preset's overrides
        only; it is read as ``ModelConfig.preset(preset, vocab_size, **model)``.
        """
        data = cls._fields_from(data, "training")
        model = data.get("model")
        if isinstance(model, dict):
            if "src_vocab_size" in model:
                data["model"] = ModelConfig.from_dict(model)
            else:  # the older layout
                data["model"] = ModelConfig.preset(data.get("preset", "small"),
                                                   vocab_size=data.get("vocab_size", 8000), **model)
        return cls(**data)


@dataclass(frozen=True)
class ClassifierTrainConfig(_RunConfig):
    """A classifier run: tokenizer, the encoder's shape (``model``, no decoder), the head's pooling,
    optimisation and the loop (the data is chosen apart).

    ``model.max_len`` is the model's positions (a CLS vector takes one); ``batch_tokens`` bounds the
    padded positions of a batch. ``pos_weight="sqrt"`` weighs each label's positive BCE term by
    sqrt(negatives / positives) (at most ``max_pos_weight``), which helps rare labels of a
    multi-label task. The learning rate warms up linearly for ``warmup`` updates to ``lr``, then
    decays as 1/sqrt(step) (``schedule="inverse_sqrt"``) or linearly to 0 at the last planned update
    (``"linear"``: ``max_steps``, else ``epochs`` times the batches of an epoch; ``minutes`` may stop
    the run before).
    """

    # tokenizer
    vocab_size: int = 8000
    tokenizer_type: str = "unigram"
    character_coverage: float = 0.9995
    tokenizer_sample: int | None = 300_000
    subword_sampling: float = 0.0  # as in TranslationTrainConfig
    # model
    model: ModelConfig = field(default_factory=_classifier_model)
    pooling: str = "mean"
    # optimisation
    lr: float = 1e-3
    warmup: int = 500
    schedule: str = "inverse_sqrt"
    weight_decay: float = 0.0
    batch_tokens: int = 4096
    max_sentences: int | None = None
    epochs: int | None = 3
    max_steps: int | None = None
    minutes: float | None = None
    eval_every: int = 500
    patience: int | None = None
    clip_norm: float | None = 1.0
    label_smoothing: float = 0.0
    pos_weight: str = "none"
    max_pos_weight: float = 30.0
    metric: str | None = None
    seed: int = 0
    save_every: int = 0  # as in TranslationTrainConfig
    save_minutes: float | None = None
    max_bad_updates: int = 10
    precision: str = "auto"  # auto, fp32, bf16, fp16: see transformer.precision
    tensorboard: bool = False  # as in TranslationTrainConfig

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelConfig):
            raise ConfigError(Field("model"), f" must be a ModelConfig, got {type(self.model).__name__}")
        self._sync_vocab()
        if self.model.num_decoder_layers != 0:
            raise ConfigError("a classifier has no decoder: ", Field("model.num_decoder_layers"),
                              f" must be 0, got {self.model.num_decoder_layers}")
        check_choice("schedule", self.schedule, CLASSIFIER_SCHEDULES)
        if self.schedule == "linear" and self.epochs is None and self.max_steps is None:
            raise ConfigError("the linear schedule needs ", Field("epochs"), " or ", Field("max_steps"),
                              " to plan its decay")
        check_choice("pos_weight", self.pos_weight, POS_WEIGHTS)
        check_choice("pooling", self.pooling, POOLING)
        check_choice("tokenizer_type", self.tokenizer_type, TOKENIZER_TYPES)
        check_subword_sampling(self.subword_sampling, self.tokenizer_type, "tokenizer_type")
        for name in ("vocab_size", "batch_tokens", "warmup"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(Field(name), f" must be a positive integer, got {value!r}")
        if self.lr <= 0:
            raise ConfigError(Field("lr"), f" must be positive, got {self.lr}")
        if self.model.max_len > self.batch_tokens:
            raise ConfigError(Field("batch_tokens"), f"={self.batch_tokens} is below ",
                              Field("model.max_len"), f"={self.model.max_len}")
        check_choice("precision", self.precision, TRAINING_PRECISIONS)
        self.loop_config()  # validates the loop fields

    def loop_config(self, precision: str | None = None) -> LoopConfig:
        """The Trainer's loop settings (:class:`~transformer.config.loop.LoopConfig`);
        ``precision`` as for translation."""
        return LoopConfig(
            epochs=self.epochs, max_steps=self.max_steps, minutes=self.minutes,
            clip_norm=self.clip_norm, eval_every=self.eval_every,
            precision=_concrete(precision or self.precision),
            log_every=min(100, self.eval_every or 100), patience=self.patience, seed=self.seed,
            save_every=self.save_every, save_minutes=self.save_minutes,
            max_bad_updates=self.max_bad_updates,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClassifierTrainConfig:
        """Build from ``config.json``'s ``training`` section; unknown keys are an error."""
        data = cls._fields_from(data, "training")
        if isinstance(data.get("model"), dict):
            data["model"] = ModelConfig.from_dict(data["model"])
        return cls(**data)
