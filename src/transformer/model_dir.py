"""The model directory: what training writes and every verb reads (DESIGN.md).

    RUN_DIR/
      config.json         {"format_version": 1, "task": ..., "model": ModelConfig.to_dict(), ...}
      model.safetensors   weights of the best model so far
      tokenizer/          SentencePiece models

Written atomically (:mod:`transformer.atomic`), read without unpickling: weights are safetensors
(shared or tied tensors are stored once). Training state (``checkpoint/``, ``snapshots/``) lives in
:mod:`transformer.training.checkpoint`; inference needs only this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_model, save_model
from torch import nn

from transformer.atomic import atomic_write, atomic_write_text, existing_dir, replace_dir
from transformer.config import ModelConfig
from transformer.config.choices import TASKS
from transformer.errors import InputError, first_line

FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_DIR = "tokenizer"


# --- weights -------------------------------------------------------------------------------------


def save_weights(model: nn.Module, path: Path | str) -> None:
    """Write ``model``'s state to a safetensors file atomically; a tied tensor is stored once."""
    atomic_write(path, lambda tmp: save_model(model, str(tmp)))


def _aliases(model: nn.Module) -> list[set[str]]:
    """Groups of state-dict names that share storage (tied or shared embeddings)."""
    groups: dict[tuple, set[str]] = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        groups.setdefault(key, set()).add(name)
    return list(groups.values())


def load_weights(model: nn.Module, path: Path | str, *, against: str = CONFIG_FILE) -> None:
    """Load a safetensors file into ``model`` in place.

    Raises InputError (one line naming ``path``) if the file is missing, corrupt, or holds tensors
    of other names or shapes than the model built from ``against`` needs.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: missing weights file")
    try:
        with safe_open(str(path), framework="pt") as f:
            shapes = {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}  # noqa: SIM118
    except Exception as err:  # safetensors raises its own error types for a bad header
        raise InputError(f"{path}: not a readable safetensors file ({first_line(err)})") from None
    state = model.state_dict()
    for group in _aliases(model):
        present = [name for name in group if name in shapes]
        if not present:
            raise InputError(
                f"{path} does not match the model of {against}: tensor {sorted(group)[0]} is missing"
            )
        for name in present:
            want = tuple(state[name].shape)
            if shapes[name] != want:
                raise InputError(
                    f"{path} does not match the model of {against}: {name} has shape "
                    f"{list(shapes[name])}, the configuration needs {list(want)}"
                )
    known = set(state)
    extra = sorted(set(shapes) - known)
    if extra:
        raise InputError(
            f"{path} does not match the model of {against}: unexpected tensor {extra[0]}"
        )
    try:
        load_model(model, str(path), strict=True)
    except Exception as err:  # the header was read above: a read error, or a file replaced since
        raise InputError(f"{path}: cannot read the weights ({first_line(err)})") from None


# --- the model directory -------------------------------------------------------------------------


@dataclass
class LoadedModel:
    """What :func:`load_model_dir` returns; ``tgt_tokenizer`` is None for a classifier."""

    model: nn.Module
    config: dict[str, Any]
    src_tokenizer: Any
    tgt_tokenizer: Any


def unwrap(model: nn.Module) -> nn.Module:
    """The bare model inside a DDP (or similar ``.module``) wrapper."""
    return getattr(model, "module", model)


def build_model(config: dict[str, Any], *, source: str = CONFIG_FILE) -> nn.Module:
    """A freshly initialised model for a ``config.json`` dict (translation or classification).

    Raises InputError naming ``source`` when the dict does not describe a valid model.
    """
    from transformer.model import Transformer, TransformerClassifier

    task = config.get("task", "translation")
    if task not in TASKS:
        raise InputError(f"{source}: unknown task {task!r} (expected one of {', '.join(TASKS)})")
    if task == "classification" and "classifier" not in config:
        raise InputError(f"{source}: no 'classifier' section")
    try:
        model_cfg = ModelConfig.from_dict(dict(config["model"]))
        if task == "classification":
            return TransformerClassifier(model_cfg, **dict(config["classifier"]))
        return Transformer(model_cfg)
    except KeyError:
        raise InputError(f"{source}: no 'model' section") from None
    except (TypeError, ValueError) as err:
        raise InputError(f"{source}: bad model configuration: {first_line(err)}") from None
    except (RuntimeError, MemoryError, OverflowError) as err:  # sizes no machine can hold
        raise InputError(f"{source}: cannot build the model it describes ({first_line(err)})") from None


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


def check_vocabulary(model_config: ModelConfig, src_tokenizer: Any, tgt_tokenizer: Any, *,
                     where: str) -> None:
    """InputError if the tokenizers' vocabularies differ from the model's embedding sizes."""
    pairs = [("source", src_tokenizer, model_config.src_vocab_size)]
    if tgt_tokenizer is not None:
        pairs.append(("target", tgt_tokenizer, model_config.tgt_vocab_size))
    for side, tok, size in pairs:
        if tok.vocab_size != size:
            raise InputError(
                f"{where}: the {side} tokenizer has {tok.vocab_size} pieces but the model's "
                f"vocabulary is {size}"
            )


def save_model_dir(
    run_dir: Path | str,
    model: nn.Module,
    *,
    config: dict[str, Any],
    src_tokenizer: Any,
    tgt_tokenizer: Any,
) -> None:
    """Write ``config.json``, ``model.safetensors`` and ``tokenizer/`` into ``run_dir`` atomically.

    ``config`` is stored with ``format_version`` and ``task`` filled in if absent and ``model`` set to
    the model's own ``ModelConfig``. ``tgt_tokenizer`` is None for a classifier.
    """
    from transformer.data.tokenizer_pair import save_tokenizers

    model = unwrap(model)
    run_dir = Path(run_dir)
    for parent in (run_dir, *run_dir.parents):
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{run_dir}: {parent} is not a directory")
            break
    run_dir.mkdir(parents=True, exist_ok=True)
    data = {"format_version": FORMAT_VERSION, "task": "translation", **config}
    data["model"] = model.config.to_dict()
    tgt = tgt_tokenizer if tgt_tokenizer is not None else src_tokenizer
    replace_dir(run_dir / TOKENIZER_DIR, lambda tmp: save_tokenizers(src_tokenizer, tgt, tmp))
    atomic_write_text(run_dir / CONFIG_FILE, json.dumps(data, indent=2, sort_keys=True) + "\n")
    save_weights(model, run_dir / WEIGHTS_FILE)


def load_tokenizer_dir(run_dir: Path | str) -> tuple[Any, Any]:
    """The (source, target) tokenizers of ``RUN_DIR/tokenizer/``; InputError when missing or bad."""
    from transformer.data.tokenizer_pair import load_tokenizers

    path = existing_dir(Path(run_dir) / TOKENIZER_DIR)
    if path is None:
        raise InputError(f"{Path(run_dir) / TOKENIZER_DIR}: missing tokenizer directory")
    return load_tokenizers(path)


def load_model_dir(run_dir: Path | str, *, device: str | torch.device = "cpu") -> LoadedModel:
    """Read a model directory written by :func:`save_model_dir`: the model (in eval mode, on
    ``device``), its config dict and its tokenizers. InputError for a missing, corrupt or
    mismatched file, naming it."""
    run_dir = Path(run_dir)
    config = read_config(run_dir)
    model = build_model(config, source=str(run_dir / CONFIG_FILE))
    src_tok, tgt_tok = load_tokenizer_dir(run_dir)
    if config.get("task", "translation") != "translation":
        tgt_tok = None
    check_vocabulary(model.config, src_tok, tgt_tok, where=str(run_dir / TOKENIZER_DIR))
    load_weights(model, run_dir / WEIGHTS_FILE)
    model.to(device).eval()
    return LoadedModel(model=model, config=config, src_tokenizer=src_tok, tgt_tokenizer=tgt_tok)
