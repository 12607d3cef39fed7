"""Fine-tuning: a run that starts from the weights of a trained or imported translation model.

    cfg = translation_config_from("runs/m30k", preset="multi30k-cpu", overrides={"minutes": 10})
    train_translation(cfg, run_dir="runs/m30k-ft", init_from="runs/m30k")

    cfg = classifier_config_from("runs/m30k", defaults="nsmc-cpu")
    train_classifier(splits, config=cfg, run_dir="runs/nsmc-ft", init_from="runs/m30k")

The origin (``RUN_DIR``: a run of ``transformer train`` or a directory written by ``transformer
import marian``) fixes what its weights need: the tokenizer(s) and the model's shape. A setting that
contradicts them (a preset of another width, ``vocab_size``, ``joint``, ``model.layers`` ...) is
refused in one line that names the setting and the origin's value; the dropouts may change. The
optimizer and the learning-rate schedule start fresh, and the run's ``config.json`` records the
origin (``init_from``: its path and the SHA-256 of its weights).

A classifier takes the origin's source tokenizer, its source embeddings and its encoder; it may be
shallower (the first N layers are copied) and, with sinusoidal positions, longer or shorter
(learned positions: at most the origin's ``max_len``, the first rows are copied).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from transformer.config import ModelConfig
from transformer.config.presets import classifier_config, translation_config
from transformer.config.runs import ClassifierTrainConfig, TranslationTrainConfig
from transformer.errors import InputError
from transformer.model_dir import (
    CONFIG_FILE,
    TOKENIZER_DIR,
    WEIGHTS_FILE,
    RunRecord,
    check_vocabulary,
    load_tokenizer_dir,
    load_weights,
    read_record,
)

log = logging.getLogger(__name__)

# the model fields a fine-tuning run may change: none of them shapes a weight
TUNABLE = ("dropout", "attention_dropout", "activation_dropout")
SHAPE = tuple(name for name in ModelConfig.__dataclass_fields__ if name not in TUNABLE)
# the encoder's shape (what a classifier copies), less the two a classifier may lower
ENCODER_SHAPE = ("d_model", "num_heads", "d_ff", "pad_id", "norm_first", "activation",
                 "positional", "positional_layout", "layer_norm_eps")
# the tokenizer settings of a run: its key in a run configuration -> the origin's setting
TRANSLATION_TOKENIZER = {"vocab_size": "vocab_size", "joint": "joint", "model_type": "model_type",
                         "byte_fallback": "byte_fallback",
                         "character_coverage": "character_coverage"}
CLASSIFIER_TOKENIZER = {"vocab_size": "vocab_size", "tokenizer_type": "model_type",
                        "character_coverage": "character_coverage"}

Names = Callable[[str, Any], str]


def _key(key: str, value: Any) -> str:
    """How a message names a setting by default: its configuration key."""
    return key


@dataclass(frozen=True)
class Origin:
    """A translation model to start from: its directory, its record (``config.json``), shape and
    tokenizers.

    ``tokenizer`` holds the settings its tokenizers were trained with (``vocab_size``, ``joint``,
    ``model_type``, ``byte_fallback``, ``character_coverage``), each only where it is known (an
    imported model records no SentencePiece settings).
    """

    path: Path
    run: RunRecord
    model: ModelConfig
    src_tokenizer: Any
    tgt_tokenizer: Any
    tokenizer: Mapping[str, Any]

    @property
    def weights(self) -> Path:
        return self.path / WEIGHTS_FILE

    def record(self) -> dict[str, Any]:
        """What a run started from it stores in its ``config.json`` under ``init_from``."""
        digest = hashlib.sha256()
        with open(self.weights, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        record: dict[str, Any] = {"path": str(self.path.resolve()), "sha256": digest.hexdigest()}
        for key, value in (("imported_from", self.run.imported_from),
                           ("best_validation", self.run.best_validation),
                           ("init_from", self.run.init_from)):
            if value is not None:
                record[key] = self.run.section(key)
        return record


def read_origin(run_dir: Path | str) -> Origin:
    """The translation model in ``run_dir``; InputError (one line naming the file) when it is not
    one: missing, of another task, or with tokenizers that do not fit its model."""
    path = Path(run_dir)
    run = read_record(path)
    if not run.is_translation:
        raise InputError(f"{path / CONFIG_FILE}: a {run.task} model; a run starts only from a "
                         "translation model (a run of transformer train, or transformer import "
                         "marian's)")
    model = run.model
    src, tgt = load_tokenizer_dir(path)
    check_vocabulary(model, src, tgt, where=str(path / TOKENIZER_DIR))
    if not (path / WEIGHTS_FILE).is_file():
        raise InputError(f"{path / WEIGHTS_FILE}: missing weights file")
    return Origin(path=path, run=run, model=model, src_tokenizer=src, tgt_tokenizer=tgt,
                  tokenizer=_tokenizer_settings(run, src, tgt))


def _tokenizer_settings(run: RunRecord, src: Any, tgt: Any) -> dict[str, Any]:
    section, training = run.tokenizer, run.training
    known = {key: section[key] for key in ("vocab_size", "joint", "model_type") if key in section}
    if "vocab_size" in training:  # a whole run configuration, not an import's decoding settings
        known.update({key: training[key] for key in ("byte_fallback", "character_coverage")
                      if key in training})
    vocabulary = getattr(src, "vocabulary", None)
    one = src is tgt or src == tgt or (vocabulary is not None
                                       and vocabulary == getattr(tgt, "vocabulary", None))
    known.setdefault("joint", one)
    known.setdefault("vocab_size", src.vocab_size)
    return known


def _as_origin(origin: Origin | Path | str) -> Origin:
    return origin if isinstance(origin, Origin) else read_origin(origin)


def _show(value: Any) -> str:
    return f"{value!r}" if isinstance(value, str) else str(value)


def _given(name: Names, key: str, value: Any) -> str:
    """A setting as given: ``--d-model 64``, or a switch alone (``--norm-first``)."""
    return name(key, value) if isinstance(value, bool) else f"{name(key, value)} {value}"


def _check_tokenizer(origin: Origin, changes: dict[str, Any], keys: Mapping[str, str],
                     name: Names) -> None:
    """Refuse a tokenizer setting in ``changes`` that is not the origin's (and remove them all)."""
    for key, setting in keys.items():
        if key not in changes:
            continue
        value = changes.pop(key)
        sizes = {origin.tokenizer["vocab_size"], origin.src_tokenizer.vocab_size}
        if setting == "vocab_size" and value in sizes:
            continue
        if setting != "vocab_size" and origin.tokenizer.get(setting, object()) == value:
            continue
        if setting == "vocab_size":
            stored = f"its tokenizer has {origin.src_tokenizer.vocab_size} pieces"
        elif setting == "joint":
            stored = ("its tokenizer is joint (one vocabulary)" if origin.tokenizer["joint"] else
                      "its tokenizer has one vocabulary per language")
        elif setting in origin.tokenizer:
            stored = f"its tokenizer has {setting} {_show(origin.tokenizer[setting])}"
        else:
            stored = "its tokenizer was not trained here (imported)"
        raise InputError(f"{_given(name, key, value)} contradicts {origin.path}: {stored}; a run started "
                         "from a model keeps its tokenizer")


def _refuse_shape(what: str, field: str, origin: Origin, stored: Any) -> InputError:
    return InputError(f"{what} contradicts {origin.path}: its model has {field} {_show(stored)}; a "
                      "run started from a model keeps its shape")


def _check_model_changes(origin: Origin, changes: dict[str, Any], name: Names, *,
                         lower: tuple[str, ...] = ()) -> dict[str, Any]:
    """Split the ``model.*`` keys off ``changes``: refuse a shape that is not the origin's (the
    fields of ``lower`` may be at most the origin's), return the model fields to set."""
    model: dict[str, Any] = {}
    for key in [k for k in changes if k.startswith("model.")]:
        value = changes.pop(key)
        field = key.partition(".")[2]
        if field in TUNABLE:
            model[field] = value
            continue
        stacks = ["num_encoder_layers"]
        if field == "layers" and "num_decoder_layers" not in lower:
            stacks.append("num_decoder_layers")
        for stack in stacks if field == "layers" else [field]:
            stored = getattr(origin.model, stack, None)
            if stored is None and stack not in ModelConfig.__dataclass_fields__:
                raise ValueError(f"unknown ModelConfig field: {stack}")
            if stack in lower:
                if not isinstance(value, int) or value > stored:
                    raise InputError(f"{_given(name, key, value)} contradicts {origin.path}: its model has "
                                     f"{stack} {stored}, and a classifier copies at most that")
                model[stack] = value
            elif value != stored:
                raise _refuse_shape(_given(name, key, value), stack, origin, stored)
    return model


def _check_preset(preset: str, shape: ModelConfig, origin: Origin, fields: tuple[str, ...],
                  name: Names) -> None:
    for field in fields:
        value, stored = getattr(shape, field), getattr(origin.model, field)
        if value != stored:
            raise InputError(f"{name('preset', preset)} {preset} has {field} {_show(value)} but "
                             f"{origin.path}'s model has {_show(stored)}; a run started from a "
                             "model keeps its shape (leave the preset out, or pick one of its shape)")


def translation_config_from(origin: Origin | Path | str, *, preset: str | None = None,
                            overrides: Mapping[str, Any] | None = None,
                            name: Names = _key) -> TranslationTrainConfig:
    """The configuration of a translation run that starts from ``origin``'s weights.

    As :func:`transformer.config.translation_config` (``preset``, default small, then
    ``overrides``), except that the model's shape and the tokenizer settings are the origin's,
    and so are the languages (``src_lang``/``tgt_lang``) unless the overrides give them.
    An override of either, or a named ``preset``, that contradicts the origin raises InputError
    naming it (``name(key, value)``: how to call a setting, e.g. its command-line flag) and the
    origin's value; the dropouts come from the overrides, else the named preset, else the origin.
    """
    origin = _as_origin(origin)
    changes = dict(overrides or {})
    _check_tokenizer(origin, changes, TRANSLATION_TOKENIZER, name)
    model = _check_model_changes(origin, changes, name)
    languages = {"src_lang": origin.run.src_lang, "tgt_lang": origin.run.tgt_lang}
    for key, language in languages.items():  # the languages it translates, unless told otherwise
        if language is not None:
            changes.setdefault(key, language)
    base = translation_config(preset or "small", changes)
    if preset is not None:
        _check_preset(preset, base.model, origin, tuple(f for f in SHAPE if "vocab" not in f), name)
        model = {**{f: getattr(base.model, f) for f in TUNABLE}, **model}
    fixed = {key: origin.tokenizer[setting] for key, setting in TRANSLATION_TOKENIZER.items()
             if setting in origin.tokenizer}
    shape_preset = origin.run.training.get("preset")
    if preset is None:  # what the shape started from, for the logs and the summary
        fixed["preset"] = shape_preset if isinstance(shape_preset, str) else "imported"
    return base.replace(model=origin.model.replace(**model), **fixed)


def classifier_config_from(origin: Origin | Path | str, *, preset: str | None = None,
                           defaults: str | None = None, overrides: Mapping[str, Any] | None = None,
                           name: Names = _key) -> ClassifierTrainConfig:
    """The configuration of a classifier whose encoder starts from ``origin``'s.

    The run's settings come from ``preset`` (named by the user: its encoder must have the origin's
    width) or ``defaults`` (chosen for the data: its width is not used), then ``overrides``. The
    encoder's shape is the origin's, all its layers unless ``model.layers`` (or
    ``model.num_encoder_layers``) takes fewer; ``max_len`` is the preset's (what the texts need),
    or ``model.max_len``, where the origin allows it: any length with sinusoids, at most the
    origin's with learned positions.
    """
    origin = _as_origin(origin)
    changes = dict(overrides or {})
    _check_tokenizer(origin, changes, CLASSIFIER_TOKENIZER, name)
    model: dict[str, Any] = {}
    lower = ("num_encoder_layers", "num_decoder_layers")
    if origin.model.positional == "learned":
        lower += ("max_len",)
    elif "model.max_len" in changes:  # sinusoids are no weights: any length keeps the encoder
        model["max_len"] = changes.pop("model.max_len")
    model.update(_check_model_changes(origin, changes, name, lower=lower))
    model.pop("num_decoder_layers", None)
    base = classifier_config(preset or defaults, changes)
    if preset is not None:
        _check_preset(preset, base.model, origin, ENCODER_SHAPE, name)
        model = {**{f: getattr(base.model, f) for f in TUNABLE}, **model}
    shape = {f: getattr(origin.model, f) for f in (*ENCODER_SHAPE, "num_encoder_layers")}
    shape["max_len"] = base.model.max_len
    if origin.model.positional == "learned":
        shape["max_len"] = min(base.model.max_len, origin.model.max_len)
    vocab = origin.src_tokenizer.vocab_size
    encoder = base.model.replace(src_vocab_size=vocab, tgt_vocab_size=vocab, share_embeddings=False,
                                 tie_embeddings=False, **{**shape, **model})
    return base.replace(model=encoder, vocab_size=vocab, **(
        {"tokenizer_type": origin.tokenizer["model_type"]} if "model_type" in origin.tokenizer
        else {}))


def load_origin(model: nn.Module, origin: Origin) -> None:
    """Load ``origin``'s weights into the translation ``model`` built for a run started from it;
    InputError naming the first field where the model's shape is not the origin's."""
    for field in SHAPE:
        value, stored = getattr(model.config, field), getattr(origin.model, field)
        if value != stored:
            raise InputError(f"the configuration's {field} {_show(value)} contradicts "
                             f"{origin.path}: its model has {_show(stored)}")
    load_weights(model, origin.weights, against=str(origin.path / CONFIG_FILE))
    imported = origin.run.imported_from or {}
    log.info("weights from %s (%s); a fresh optimizer and schedule", origin.path,
             imported.get("format", "a run of ours"))


def init_encoder(classifier: nn.Module, origin: Origin) -> list[str]:
    """Copy ``origin``'s source embeddings and encoder into ``classifier`` (a
    :class:`~transformer.model.TransformerClassifier`) in place; returns the names copied (the
    head and a CLS vector keep their fresh values). InputError when the shapes do not allow it."""
    from transformer.model import Transformer

    mine, theirs = classifier.config, origin.model
    fields = (*ENCODER_SHAPE, "src_vocab_size")
    for field in fields:
        if getattr(mine, field) != getattr(theirs, field):
            raise InputError(f"the classifier's {field} {_show(getattr(mine, field))} contradicts "
                             f"{origin.path}: its encoder has {_show(getattr(theirs, field))}")
    if mine.num_encoder_layers > theirs.num_encoder_layers:
        raise InputError(f"the classifier's {mine.num_encoder_layers} encoder layers are more than "
                         f"the {theirs.num_encoder_layers} of {origin.path}")
    if theirs.positional == "learned" and mine.max_len > theirs.max_len:
        raise InputError(f"the classifier's max_len {mine.max_len} is more than the "
                         f"{theirs.max_len} learned positions of {origin.path}")
    source = Transformer(theirs)
    load_weights(source, origin.weights, against=str(origin.path / CONFIG_FILE))
    state = source.state_dict()
    wanted = {}
    for target, tensor in classifier.state_dict().items():
        head, _, rest = target.partition(".")
        if head == "embed":
            wanted[target] = state[f"src_embed.{rest}"][: tensor.shape[0]]
        elif head == "encoder":
            wanted[target] = state[target]
    missing, _ = classifier.load_state_dict(wanted, strict=False)
    assert set(missing) <= {"cls", "head.weight", "head.bias"}, missing
    log.info("encoder from %s: %d tensors (%d of its %d layers)", origin.path, len(wanted),
             mine.num_encoder_layers, theirs.num_encoder_layers)
    return sorted(wanted)
