"""The model directory and the training checkpoint, written atomically and read without unpickling.

    RUN_DIR/
      config.json         {"format_version": 1, "task": ..., "model": ModelConfig.to_dict(), ...}
      model.safetensors   weights of the best model so far
      tokenizer/          SentencePiece models
      checkpoint/         last training state: model.safetensors + state.pt
      snapshots/          step-NNNNNNN.safetensors: weights at the last evaluations (averaging)
      metrics.jsonl       written by the Trainer

Every file is written to a temporary name in its own directory, fsync'ed and moved into place with
``os.replace``; a directory (``tokenizer/``, ``checkpoint/``) is filled under ``NAME.tmp`` and then
swapped in by two renames (``NAME`` -> ``NAME.old``, ``NAME.tmp`` -> ``NAME``). A kill between those
two renames leaves ``NAME.old``, which readers fall back to, so some complete version is always
readable. Weights are safetensors (shared or tied tensors are stored once); ``state.pt`` holds only
tensors and plain Python values and is read with ``torch.load(..., weights_only=True)``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_model, save_model
from torch import nn

from transformer.config import ModelConfig
from transformer.errors import InputError

FORMAT_VERSION = 1
TASKS = ("translation", "classification")
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_DIR = "tokenizer"
CHECKPOINT_DIR = "checkpoint"
STATE_FILE = "state.pt"
SNAPSHOT_DIR = "snapshots"


# --- atomic writes -------------------------------------------------------------------------------


def _fsync_path(path: Path) -> None:
    """Flush a file or a directory entry to disk (directories: best effort, not on every OS)."""
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if path.is_dir() else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path | str, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, fsync it, then rename it to ``path``.

    If ``write`` fails the temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        _fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_path(path.parent)


def atomic_write_text(path: Path | str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def replace_dir(path: Path | str, fill: Callable[[Path], None]) -> None:
    """Fill a fresh ``path.tmp`` directory with ``fill(tmp)``, then swap it in for ``path``."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    old = path.with_name(path.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        fill(tmp)
        for child in tmp.rglob("*"):
            _fsync_path(child)
        _fsync_path(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if path.exists():
        shutil.rmtree(old, ignore_errors=True)  # a stale copy from an earlier, completed swap
        os.replace(path, old)
    os.replace(tmp, path)  # a kill before this line leaves ``old`` for readers
    _fsync_path(path.parent)
    shutil.rmtree(old, ignore_errors=True)


def existing_dir(path: Path | str) -> Path | None:
    """``path`` if it is a directory, else the ``path.old`` an interrupted swap left, else None."""
    path = Path(path)
    if path.is_dir():
        return path
    old = path.with_name(path.name + ".old")
    return old if old.is_dir() else None


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
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(f"{path}: not a readable safetensors file ({reason})") from None
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
    except Exception as err:  # truncated data behind a valid header
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(f"{path}: corrupt weights ({reason})") from None


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
    try:
        model_cfg = ModelConfig.from_dict(dict(config["model"]))
        if task == "classification":
            return TransformerClassifier(model_cfg, **dict(config.get("classifier", {})))
        return Transformer(model_cfg)
    except KeyError:
        raise InputError(f"{source}: no 'model' section") from None
    except (TypeError, ValueError) as err:
        raise InputError(f"{source}: bad model configuration: {err}") from None


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
    from transformer.data.tokenizer import save_tokenizers

    model = unwrap(model)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    data = {"format_version": FORMAT_VERSION, "task": "translation", **config}
    data["model"] = model.config.to_dict()
    tgt = tgt_tokenizer if tgt_tokenizer is not None else src_tokenizer
    replace_dir(run_dir / TOKENIZER_DIR, lambda tmp: save_tokenizers(src_tokenizer, tgt, tmp))
    atomic_write_text(run_dir / CONFIG_FILE, json.dumps(data, indent=2, sort_keys=True) + "\n")
    save_weights(model, run_dir / WEIGHTS_FILE)


def load_tokenizer_dir(run_dir: Path | str) -> tuple[Any, Any]:
    """The (source, target) tokenizers of ``RUN_DIR/tokenizer/``; InputError when missing or bad."""
    from transformer.data.tokenizer import load_tokenizers

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


# --- random number generators ---------------------------------------------------------------------


def rng_state() -> dict[str, Any]:
    """This process's Python, NumPy, torch and CUDA generator states, as weights_only-safe values."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {"keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state(
        ("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"])
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices) from one integer."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


# --- snapshots: the weights at recent evaluations, for checkpoint averaging -----------------------


def snapshot_path(run_dir: Path | str, step: int) -> Path:
    return Path(run_dir) / SNAPSHOT_DIR / f"step-{step:07d}.safetensors"


def list_snapshots(run_dir: Path | str) -> list[tuple[int, Path]]:
    """``(step, path)`` of every snapshot in ``RUN_DIR/snapshots/``, oldest first."""
    found = []
    folder = Path(run_dir) / SNAPSHOT_DIR
    for path in folder.glob("step-*.safetensors") if folder.is_dir() else ():
        digits = path.name[len("step-"):-len(".safetensors")]
        if digits.isdigit():
            found.append((int(digits), path))
    return sorted(found)


def save_snapshot(run_dir: Path | str, model: nn.Module, *, step: int, keep: int) -> None:
    """Write the weights of update ``step`` and delete all but the newest ``keep`` snapshots."""
    path = snapshot_path(run_dir, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_weights(unwrap(model), path)
    for _, old in list_snapshots(run_dir)[:-keep]:
        old.unlink(missing_ok=True)


def drop_snapshots_after(run_dir: Path | str, step: int) -> None:
    """Delete snapshots newer than ``step`` (a resumed run redoes those updates)."""
    for saved, path in list_snapshots(run_dir):
        if saved > step:
            path.unlink(missing_ok=True)


# --- the training checkpoint ---------------------------------------------------------------------


def save_checkpoint(run_dir: Path | str, *, model: nn.Module, state: dict[str, Any]) -> None:
    """Write ``RUN_DIR/checkpoint/`` (weights + ``state``) by swapping in a complete new directory.

    ``state`` must hold only tensors and plain Python values (optimizer and scheduler state dicts,
    counters, RNG states) so that it loads with ``weights_only=True``.
    """
    model = unwrap(model)

    def fill(tmp: Path) -> None:
        save_model(model, str(tmp / WEIGHTS_FILE))
        torch.save({"format_version": FORMAT_VERSION, **state}, tmp / STATE_FILE)

    replace_dir(Path(run_dir) / CHECKPOINT_DIR, fill)


def has_checkpoint(run_dir: Path | str) -> bool:
    return existing_dir(Path(run_dir) / CHECKPOINT_DIR) is not None


def load_checkpoint(
    run_dir: Path | str, *, model: nn.Module, map_location: str | torch.device = "cpu"
) -> dict[str, Any]:
    """Load ``RUN_DIR/checkpoint/``'s weights into ``model`` and return its state dict.

    InputError (one line) when the checkpoint is missing, corrupt, or from another configuration.
    """
    path = existing_dir(Path(run_dir) / CHECKPOINT_DIR)
    if path is None:
        raise InputError(f"{Path(run_dir) / CHECKPOINT_DIR}: no checkpoint to resume from")
    load_weights(unwrap(model), path / WEIGHTS_FILE)
    state_path = path / STATE_FILE
    if not state_path.is_file():
        raise InputError(f"{state_path}: missing training state")
    try:
        state = torch.load(state_path, map_location=map_location, weights_only=True)
    except Exception as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(f"{state_path}: unreadable training state ({reason})") from None
    if not isinstance(state, dict) or state.get("format_version") != FORMAT_VERSION:
        raise InputError(f"{state_path}: not a training state of format {FORMAT_VERSION}")
    return state
