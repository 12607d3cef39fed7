"""A run's configuration in a file: ``train --config FILE`` and ``classify train --config FILE``
read what ``transformer config show`` prints, a JSON object ``{"task": ..., "training": {...}}``.

    config = read_run_config("c.json", task="translation")            # a TranslationTrainConfig
    config = run_config_from_file("c.json", task="translation", overrides={"max_steps": 20})

Every key must be a field of the task's configuration (``training``) or of its model
(``training.model``), and every value must have the field's JSON type; anything else is refused
in one line that names the file and the key. Overrides (the flags given beside ``--config``) then
change single fields, as ``apply_overrides`` does for a preset, with one rule of data: overrides
that name the training data (a corpus, files or a prepared directory) replace the file's data
as a whole, so a file written for Multi30k trains on the files the flags give.

JSON only: YAML would be a dependency, and its 1.1 rules read ``1e-3`` as a string and ``no`` as
false, which the type check would refuse in a file that looks right.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union

from transformer.config.model import ModelConfig
from transformer.config.overrides import apply_overrides
from transformer.config.runs import ClassifierTrainConfig, TranslationTrainConfig
from transformer.errors import InputError, read_text

RUN_CONFIGS: Mapping[str, type] = types.MappingProxyType({
    "translation": TranslationTrainConfig,
    "classification": ClassifierTrainConfig,
})
TOP_LEVEL = ("task", "training")
# the fields that say where a translation run's data come from: given as overrides, they replace
# the file's (a corpus by name, text files, or a prepared directory; see the module docstring)
DATA_FIELDS = ("data", "train_src", "train_tgt", "valid_src", "valid_tgt", "data_dir")
TRAINING_DATA = ("data", "train_src", "train_tgt", "data_dir")


def read_run_config(path: str | Path, *, task: str) -> Any:
    """The ``task`` run configuration (translation or classification) in the file ``path``;
    InputError in one line naming the file and the key at fault."""
    path = Path(path)
    text = read_text(path, "configuration file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not JSON (line {err.lineno} column {err.colno}: {err.msg}); "
                         "--config reads what `transformer config show` prints") from None
    if not isinstance(data, dict) or not isinstance(data.get("training"), dict):
        raise InputError(f"{path}: expected an object with a \"training\" object, as `transformer "
                         "config show` prints")
    unknown = sorted(set(data) - set(TOP_LEVEL))
    if unknown:
        raise InputError(f"{path}: unknown key {unknown[0]!r} (a configuration file holds "
                         f"{' and '.join(repr(k) for k in TOP_LEVEL)})")
    if data.get("task", task) != task:
        raise InputError(f"{path}: a {data['task']} configuration (\"task\"), not a {task} one")
    cls = RUN_CONFIGS[task]
    check_types(data["training"], cls, where=f"{path}: training")
    try:
        return cls.from_dict(data["training"])
    except (TypeError, ValueError) as err:
        raise InputError(f"{path}: {str(err).splitlines()[0]}") from None


def run_config_from_file(path: str | Path, *, task: str,
                         overrides: Mapping[str, Any] | None = None) -> Any:
    """:func:`read_run_config` with ``overrides`` applied (keys as ``apply_overrides``; a
    ValueError names the key, as for a preset's overrides). Overrides that name the training
    data of a translation run replace the file's data whole."""
    config = read_run_config(path, task=task)
    changes = dict(overrides or {})
    if task == "translation" and any(changes.get(key) is not None for key in TRAINING_DATA):
        for key in DATA_FIELDS:
            changes.setdefault(key, None)
    return apply_overrides(config, changes)


def check_types(values: Mapping[str, Any], cls: type, *, where: str) -> None:
    """InputError naming ``where.KEY`` for a key of ``values`` that is not a field of the
    dataclass ``cls``, or a value that is not of its field's JSON type (nested dataclasses are
    checked the same way)."""
    import difflib

    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    for key, value in values.items():
        if key not in fields:
            close = difflib.get_close_matches(key, sorted(fields), n=1)
            raise InputError(f"{where}.{key}: unknown key" + (f" (did you mean {close[0]!r}?)"
                                                               if close else ""))
        kind = hints[key]
        if dataclasses.is_dataclass(kind) and isinstance(value, dict):
            check_types(value, kind, where=f"{where}.{key}")
        elif not fits(value, kind):
            raise InputError(f"{where}.{key}: expected {describe(kind)}, got {json.dumps(value)}")


def fits(value: Any, kind: Any) -> bool:
    """Whether the JSON ``value`` can stand for a field annotated ``kind`` (a float field takes
    an integer; a tuple field takes a list; a bool is not a number)."""
    origin = typing.get_origin(kind)
    if origin in (Union, types.UnionType):
        return any(fits(value, arm) for arm in typing.get_args(kind))
    if kind is type(None):
        return value is None
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is str:
        return isinstance(value, str)
    if origin is tuple:
        args = typing.get_args(kind)
        if not isinstance(value, list):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(fits(item, args[0]) for item in value)
        return len(value) == len(args) and all(fits(v, a) for v, a in zip(value, args, strict=True))
    if kind is ModelConfig:
        return False  # a dict is checked field by field (check_types); anything else is wrong
    return isinstance(value, kind)


def describe(kind: Any) -> str:
    """``int | None`` -> ``"an integer or null"``, in JSON's words."""
    origin = typing.get_origin(kind)
    if origin in (Union, types.UnionType):
        return " or ".join(describe(arm) for arm in typing.get_args(kind))
    if origin is tuple:
        args = typing.get_args(kind)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {describe(args[0]).removeprefix('a ').removeprefix('an ')}s"
        return f"a list of {len(args)} numbers" if all(a is float for a in args) else "a list"
    names = {type(None): "null", bool: "true or false", int: "an integer", float: "a number",
             str: "a string", ModelConfig: "an object (the model's fields)"}
    return names.get(kind, getattr(kind, "__name__", str(kind)))
