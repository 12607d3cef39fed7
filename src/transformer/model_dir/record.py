"""``config.json`` as one typed record: read, parsed and checked once, here; every reader of a model
directory (translate, evaluate, serve, attention, fine-tuning, averaging, Python) goes through it.

    record = read_record("runs/m30k")
    record.task, record.model                 # "translation", a ModelConfig
    record.src_lang, record.tgt_lang          # "en", "de" (None where the run did not say)
    record.decode_options(beam_size=1)        # the run's length limits, greedy

The file (``format_version`` 1)::

    {"format_version": 1, "task": "translation" | "classification",
     "model": ModelConfig.to_dict(),          "classifier": {"num_labels", "pooling", "multi_label"},
     "labels": [...], "thresholds": [...],    (classification)
     "tokenizer": {...}, "training": {the run's configuration}, "data": {...},
     "precision": {...}, "best_validation": {...},
     "imported_from" | "init_from" | "averaged_from" | "demo": (where the weights came from)}

A file without ``task`` is a translation model (the first runs wrote none). Every default a reader
falls back on is written here once (the decoding limits come from :mod:`transformer.config.decoding`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from transformer.config import ModelConfig
from transformer.config.choices import TASKS
from transformer.config.decoding import MAX_LEN_A, MAX_LEN_B, DecodeOptions
from transformer.errors import InputError, first_line

FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
# what the sentence splitter falls back to when a run names no source language
DEFAULT_SOURCE_LANGUAGE = "en"
# sections that hold a JSON object when present
SECTIONS = ("training", "data", "tokenizer", "precision", "best_validation", "imported_from",
            "init_from", "demo")
EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Mapping[str, Any]:
    return EMPTY


@dataclass(frozen=True)
class ClassifierHead:
    """A classifier's head on the encoder: what ``TransformerClassifier`` takes besides the shape."""

    num_labels: int
    pooling: str = "mean"
    multi_label: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class TrainedOn:
    """What a run trained on, as far as evaluating it needs: the corpus by name (None: files),
    the seed (the built-in task's splits depend on it) and, for a classifier, how its split was
    drawn and how its files were read (the columns and separator an evaluation file defaults to)."""

    corpus: str | None = None
    seed: int = 0
    recipe: Mapping[str, Any] | None = None
    text_column: str | int = "text"
    label_column: str | int = "label"
    label_separator: str = ","


@dataclass(frozen=True)
class RunRecord:
    """A model directory's ``config.json``, typed. ``source`` names the file in messages.

    The sections that only some readers need (``training``: the run's configuration as
    ``config show`` prints it; ``tokenizer``, ``precision``, ``data``, provenance) are read-only
    mappings; :meth:`to_dict` gives the whole file back for a writer that adds to it.
    """

    task: str
    model: ModelConfig
    source: str = CONFIG_FILE
    classifier: ClassifierHead | None = None
    labels: tuple[str, ...] = ()
    thresholds: tuple[float, ...] | None = None  # multi-label decision thresholds, one per label
    src_lang: str | None = None
    tgt_lang: str | None = None
    decode_max_len_a: float = MAX_LEN_A
    decode_max_len_b: int = MAX_LEN_B
    trained_on: TrainedOn = TrainedOn()
    training: Mapping[str, Any] = field(default_factory=_empty)
    data: Mapping[str, Any] = field(default_factory=_empty)
    tokenizer: Mapping[str, Any] = field(default_factory=_empty)
    precision: Mapping[str, Any] | None = None
    best_validation: Mapping[str, Any] | None = None
    imported_from: Mapping[str, Any] | None = None
    init_from: Mapping[str, Any] | None = None
    demo: Mapping[str, Any] | None = None
    averaged_from: tuple[str, ...] | None = None
    raw: Mapping[str, Any] = field(default_factory=_empty)

    @property
    def is_translation(self) -> bool:
        return self.task == "translation"

    @property
    def languages(self) -> tuple[str, str | None]:
        """(source, target) for sentence splitting and joining: the source defaults to English
        (what the splitter falls back to), the target to None (sentences joined with spaces)."""
        return self.src_lang or DEFAULT_SOURCE_LANGUAGE, self.tgt_lang

    def decode_options(self, **changes: Any) -> DecodeOptions:
        """Decoding options with this run's length limits, then ``changes`` (ValueError for a bad
        value, naming it)."""
        base = {"max_len_a": self.decode_max_len_a, "max_len_b": self.decode_max_len_b}
        return DecodeOptions(**{**base, **changes})

    def section(self, name: str) -> Any:
        """The file's top-level entry ``name`` as written (None when absent): for comparing two
        runs' files whole, or copying it into another), never for reading a setting."""
        return _thawed(self.raw.get(name))

    def to_dict(self) -> dict[str, Any]:
        """The whole file, as a fresh dict (JSON types)."""
        return _thawed(self.raw)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = CONFIG_FILE) -> RunRecord:
        """Parse and check a ``config.json`` object; InputError naming ``source`` and the field."""
        task = data.get("task", "translation")
        if task not in TASKS:
            raise InputError(f"{source}: unknown task {task!r} (expected one of {', '.join(TASKS)})")
        if task == "classification" and "classifier" not in data:
            raise InputError(f"{source}: no 'classifier' section")
        if "model" not in data:
            raise InputError(f"{source}: no 'model' section")
        sections = {name: _section(data, name, source) for name in SECTIONS}
        training = sections["training"] or EMPTY
        head = _classifier(data, source) if task == "classification" else None
        labels, thresholds = _labels(data, head, source) if head is not None else ((), None)
        return cls(
            task=task, model=_model(data["model"], source), source=source, classifier=head,
            labels=labels, thresholds=thresholds,
            src_lang=_language(training, "src_lang", source),
            tgt_lang=_language(training, "tgt_lang", source),
            decode_max_len_a=_number(training, "decode_max_len_a", MAX_LEN_A, source),
            decode_max_len_b=_number(training, "decode_max_len_b", MAX_LEN_B, source, integer=True),
            trained_on=_trained_on(task, training, sections["data"] or EMPTY),
            training=training, data=sections["data"] or EMPTY,
            tokenizer=sections["tokenizer"] or EMPTY, precision=sections["precision"],
            best_validation=sections["best_validation"], imported_from=sections["imported_from"],
            init_from=sections["init_from"], demo=sections["demo"],
            averaged_from=_averaged_from(data, source), raw=_frozen(data),
        )


def read_config(run_dir: Path | str) -> dict[str, Any]:
    """``RUN_DIR/config.json`` as a dict; InputError if missing, not JSON, or of another format."""
    path = Path(run_dir) / CONFIG_FILE
    if not Path(run_dir).is_dir():
        raise InputError(f"{run_dir}: no such model directory")
    if not path.is_file():
        raise InputError(f"{path}: missing (is {run_dir} a directory written by transformer train?)")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        line = getattr(err, "lineno", None)
        where = f" at line {line}" if line else ""
        raise InputError(f"{path}: not valid JSON{where}") from None
    if not isinstance(config, dict):
        raise InputError(f"{path}: expected a JSON object")
    version = config.get("format_version")
    if version != FORMAT_VERSION:
        raise InputError(f"{path}: format_version {version!r} is not {FORMAT_VERSION}")
    return config


def read_record(run_dir: Path | str) -> RunRecord:
    """``RUN_DIR/config.json`` read, parsed and checked: InputError naming the file and field."""
    return RunRecord.from_dict(read_config(run_dir), source=str(Path(run_dir) / CONFIG_FILE))


# --- parsing, one field at a time -----------------------------------------------------------------


def _frozen(value: Any) -> Any:
    """A read-only copy of a JSON value: mappings become MappingProxyType, lists tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def _thawed(value: Any) -> Any:
    """A JSON value back from :func:`_frozen`: dicts and lists, fresh."""
    if isinstance(value, Mapping):
        return {k: _thawed(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thawed(v) for v in value]
    return value


def _section(data: Mapping[str, Any], name: str, source: str) -> Mapping[str, Any] | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError(f"{source}: '{name}' must be a JSON object")
    return _frozen(value)


def _model(section: Any, source: str) -> ModelConfig:
    if not isinstance(section, Mapping):
        raise InputError(f"{source}: 'model' must be a JSON object")
    try:
        return ModelConfig.from_dict(dict(section))
    except (TypeError, ValueError) as err:
        raise InputError(f"{source}: bad model configuration: {first_line(err)}") from None


def _classifier(data: Mapping[str, Any], source: str) -> ClassifierHead:
    section = data["classifier"]
    try:
        if not isinstance(section, Mapping):
            raise TypeError("'classifier' must be a JSON object")
        head = ClassifierHead(**section)
    except TypeError as err:
        raise InputError(f"{source}: bad model configuration: {first_line(err)}") from None
    if isinstance(head.num_labels, bool) or not isinstance(head.num_labels, int):
        raise InputError(f"{source}: bad model configuration: classifier.num_labels must be an "
                         f"integer, got {head.num_labels!r}")
    return head


def _probability(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def _labels(data: Mapping[str, Any], head: ClassifierHead,
            source: str) -> tuple[tuple[str, ...], tuple[float, ...] | None]:
    names = data.get("labels")
    if not isinstance(names, list) or len(names) != head.num_labels:
        raise InputError(f"{source}: 'labels' must list the model's {head.num_labels} label names")
    if not all(isinstance(n, str) for n in names):
        raise InputError(f"{source}: 'labels' must be strings")
    thresholds = data.get("thresholds")
    if not head.multi_label or thresholds is None:
        return tuple(names), None
    if (not isinstance(thresholds, list) or len(thresholds) != len(names)
            or not all(_probability(t) for t in thresholds)):
        raise InputError(f"{source}: 'thresholds' must hold one number in [0, 1] per label")
    return tuple(names), tuple(float(t) for t in thresholds)


def _language(training: Mapping[str, Any], key: str, source: str) -> str | None:
    value = training.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InputError(f"{source}: training.{key} must be a language code, got {value!r}")
    return value


def _number(training: Mapping[str, Any], key: str, default: float, source: str, *,
            integer: bool = False) -> Any:
    """``training[key]`` (``default`` when absent), InputError naming it when not a number."""
    value = training.get(key, default)
    kinds = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
        raise InputError(f"{source}: training.{key} must be a number, got {value!r}")
    return value


def _trained_on(task: str, training: Mapping[str, Any], data: Mapping[str, Any]) -> TrainedOn:
    seed = training.get("seed", 0)
    seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else 0
    if task == "translation":
        corpus = training.get("data")
        return TrainedOn(corpus=corpus if isinstance(corpus, str) else None, seed=seed)
    name, recipe = data.get("name"), data.get("recipe")
    separator = data.get("label_separator")
    return TrainedOn(
        corpus=name if isinstance(name, str) else None, seed=seed,
        recipe=recipe if isinstance(recipe, Mapping) and recipe else None,
        text_column=_column(data.get("text_column"), "text"),
        label_column=_column(data.get("label_column"), "label"),
        label_separator=separator if isinstance(separator, str) and separator else ",",
    )


def _column(value: Any, default: str) -> str | int:
    return value if isinstance(value, str | int) and not isinstance(value, bool) else default


def _averaged_from(data: Mapping[str, Any], source: str) -> tuple[str, ...] | None:
    value = data.get("averaged_from")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{source}: 'averaged_from' must list directories")
    return tuple(value)
