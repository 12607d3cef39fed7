"""The model directory: what training writes and every verb reads (DESIGN.md).

    RUN_DIR/
      config.json         the run's record (:mod:`transformer.model_dir.record`)
      model.safetensors   weights of the best model so far (:mod:`transformer.model_dir.weights`)
      tokenizer/          SentencePiece models

    loaded = load_model_dir("runs/m30k")       # LoadedModel: model (eval mode), record, tokenizers

Written atomically (:mod:`transformer.atomic`), read without unpickling. Loading reads the record,
compares its sizes with the weights' header before anything is allocated
(:func:`~transformer.model_dir.weights.check_record`), then builds the model and loads the weights. Training state
(``checkpoint/``, ``snapshots/``) lives in ``transformer.training``; inference needs only this
package.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from transformer.atomic import atomic_write_text, existing_dir, replace_dir
from transformer.errors import InputError, first_line
from transformer.model_dir.record import (
    CONFIG_FILE,
    FORMAT_VERSION,
    RunRecord,
    read_record,
)
from transformer.model_dir.weights import WEIGHTS_FILE, check_record, load_weights, save_weights

# PyTorch is imported where a model is built: the record, the tokenizers and the weights' header
# are read without it (another engine may decode from its own copy of the weights)
if TYPE_CHECKING:
    import torch
    from torch import nn

    from transformer.config import ModelConfig
    from transformer.data.tokenizer import Tokenizer
    from transformer.data.vocab_tokenizer import VocabTokenizer
    from transformer.model import Transformer, TransformerClassifier

TOKENIZER_DIR = "tokenizer"
# a SentencePiece model of ours, or the vocabulary list and segmenters of an imported Marian model
TextTokenizer = Union["Tokenizer", "VocabTokenizer"]


@dataclass
class LoadedModel:
    """What :func:`load_model_dir` returns: the model in eval mode, its record, its tokenizers
    (``tgt_tokenizer`` is None for a classifier).

    Read with ``lazy=True``, the model is built and its weights loaded on first use of ``model``
    (an engine that decodes from its own copy of the weights may never need ours); ``config`` and
    ``device`` are known without it. InputError then if the weights file was replaced after
    the directory was read (a run still training): its tokenizers and another engine's copy
    would no longer be the ones of these weights. ``device``: a torch.device, or a device's name
    ("cpu") where PyTorch was not needed to resolve it; ``device_type`` reads either."""

    record: RunRecord
    src_tokenizer: TextTokenizer
    tgt_tokenizer: TextTokenizer | None
    device: torch.device | str
    weights: Path | None = None  # read on first use of ``model`` when not given one
    _model: Transformer | TransformerClassifier | None = None
    _stamp: tuple[int, int] | None = None  # the weights file's (size, mtime) when read lazily

    @property
    def model(self) -> Transformer | TransformerClassifier:
        """The model in eval mode on ``device``, built and loaded now if it was not yet."""
        if self._model is None:
            if self.weights is None:
                raise ValueError("a LoadedModel needs a model or a weights file")
            if self._stamp is not None and self._stamp != _stamp(self.weights):
                raise InputError(f"{self.weights}: replaced after the run was opened (is it still "
                                 "training?); open the run again")
            self._model = _read_model(self.record, self.weights, self.device)
        return self._model

    @property
    def device_type(self) -> str:
        """``cpu``, ``cuda``, ``meta``...: the device's type, without importing PyTorch."""
        return self.device.type if hasattr(self.device, "type") else str(self.device).partition(":")[0]

    @property
    def weights_read(self) -> bool:
        """Whether ``model`` has been built (its weights read)."""
        return self._model is not None

    @property
    def config(self) -> ModelConfig:
        return self.record.model

    @property
    def task(self) -> str:
        return self.record.task


def unwrap(model: nn.Module) -> nn.Module:
    """The bare model inside a DDP (or similar ``.module``) wrapper."""
    return getattr(model, "module", model)


def build_model(config: RunRecord | Mapping[str, Any], *, source: str = CONFIG_FILE,
                device: str | torch.device | None = None) -> nn.Module:
    """A freshly initialised model for a record (or a ``config.json`` dict, parsed here), on
    ``device`` (default: PyTorch's default device).

    Raises InputError naming the file when it does not describe a model this machine can build.
    """
    import torch

    from transformer.model import Transformer, TransformerClassifier

    record = config if isinstance(config, RunRecord) else RunRecord.from_dict(config, source=source)
    try:
        with torch.device(device) if device is not None else nullcontext():
            if record.classifier is not None:
                return TransformerClassifier(record.model, **record.classifier.to_dict())
            return Transformer(record.model)
    except (TypeError, ValueError) as err:
        raise InputError(f"{record.source}: bad model configuration: {first_line(err)}") from None
    except (RuntimeError, MemoryError, OverflowError) as err:  # sizes no machine can hold
        raise InputError(f"{record.source}: cannot build the model it describes "
                         f"({first_line(err)})") from None


def check_vocabulary(model_config: ModelConfig, src_tokenizer: TextTokenizer,
                     tgt_tokenizer: TextTokenizer | None, *, where: str) -> None:
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
    config: Mapping[str, Any],
    src_tokenizer: TextTokenizer,
    tgt_tokenizer: TextTokenizer | None,
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


def load_tokenizer_dir(run_dir: Path | str) -> tuple[TextTokenizer, TextTokenizer]:
    """The (source, target) tokenizers of ``RUN_DIR/tokenizer/``; InputError when missing or bad."""
    from transformer.data.tokenizer_pair import load_tokenizers

    path = existing_dir(Path(run_dir) / TOKENIZER_DIR)
    if path is None:
        raise InputError(f"{Path(run_dir) / TOKENIZER_DIR}: missing tokenizer directory")
    return load_tokenizers(path)


def build_checked(record: RunRecord, weights: Path | str) -> nn.Module:
    """A model for ``record`` whose sizes the ``weights`` file's header has been compared with
    first: a record that describes another (or an impossibly large) model is refused naming the
    field before anything is allocated. The weights are not loaded."""
    check_record(record, weights)
    return build_model(record)


def load_model_dir(run_dir: Path | str, *, device: str | torch.device = "cpu",
                   lazy: bool = False) -> LoadedModel:
    """Read a model directory written by :func:`save_model_dir`: the model (in eval mode, on
    ``device``), its record and its tokenizers. InputError for a missing, corrupt or mismatched
    file, naming it (and, for a shape, the field of ``config.json`` behind it). ``lazy``: the
    record, the tokenizers and the weights' header are checked now, the model is built and its
    weights read on first use of ``LoadedModel.model``."""
    run_dir = Path(run_dir)
    record = read_record(run_dir)
    weights = run_dir / WEIGHTS_FILE
    check_record(record, weights)
    src_tok, tgt_tok = load_tokenizer_dir(run_dir)
    if not record.is_translation:
        tgt_tok = None
    check_vocabulary(record.model, src_tok, tgt_tok, where=str(run_dir / TOKENIZER_DIR))
    if not isinstance(device, str) or device != "cpu":  # "cpu" stays a name: PyTorch not needed
        import torch

        device = torch.device(device)
    loaded = LoadedModel(record=record, src_tokenizer=src_tok, tgt_tokenizer=tgt_tok,
                         device=device, weights=weights)
    if lazy:
        loaded._stamp = _stamp(weights)
    else:
        loaded.model  # noqa: B018 (built and read now)
    return loaded


def _stamp(weights: Path) -> tuple[int, int] | None:
    """The file's size and modification time in nanoseconds (None: it is gone)."""
    try:
        stat = weights.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def _read_model(record: RunRecord, weights: Path, device: torch.device | str) -> nn.Module:
    """The model of ``record`` with the ``weights`` file's tensors, in eval mode on ``device``
    (shapes only on the meta device: nothing is read)."""
    import torch

    device = torch.device(device)
    if device.type == "meta":  # shapes only (a caller's check): nothing to load
        model = build_model(record, device="meta")
    else:
        model = build_model(record)
        load_weights(model, weights, against=record.source)
    return model.to(device).eval()
