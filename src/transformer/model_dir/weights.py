"""A model's weights as a safetensors file: written atomically, read without unpickling, and
compared with the model's shapes from the file's header before any tensor is read.

    save_weights(model, "runs/x/model.safetensors")
    load_weights(model, "runs/x/model.safetensors")      # InputError naming a tensor and a field

Before a model is built, :func:`check_record` compares the record's sizes (vocabularies, width,
positions, feed-forward width, layers, labels) with the tensors the header lists, so a
``config.json`` that describes a model of 64 TiB beside weights of 1 MB is refused in one line
naming the field, and nothing is allocated. (Building on PyTorch's ``meta`` device would say the
same, but its initialisers run through reference implementations that import the compiler:
seconds at every start.)
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

from safetensors import safe_open

from transformer.atomic import atomic_write
from transformer.errors import InputError, first_line

# PyTorch (and safetensors' PyTorch side) where tensors are read or written: a header is read
# without them
if TYPE_CHECKING:
    from torch import nn

    from transformer.model_dir.record import RunRecord

WEIGHTS_FILE = "model.safetensors"
# which configuration field sets an axis of a tensor: (name pattern, axis) -> field, first match
# wins; every other axis of the model is d_model's (a multiple of it for fused projections)
_AXES = (
    (r"(^|\.)(src_embed|embed)\.token\.weight$", 0, "model.src_vocab_size"),
    (r"(^|\.)tgt_embed\.token\.weight$", 0, "model.tgt_vocab_size"),
    (r"^output_projection\.(weight|bias)$", 0, "model.tgt_vocab_size"),
    (r"position\.embedding\.weight$", 0, "model.max_len"),
    (r"\.linear1\.(weight|bias)$", 0, "model.d_ff"),
    (r"\.linear2\.weight$", 1, "model.d_ff"),
    (r"^head\.(weight|bias)$", 0, "classifier.num_labels"),
)
# tensors that exist or not by a switch of the configuration
_SWITCHES = (
    (r"^(encoder)\.layers\.\d+\.", "model.num_encoder_layers"),
    (r"^(decoder)\.layers\.\d+\.", "model.num_decoder_layers"),
    (r"position\.embedding\.weight$", "model.positional"),
    (r"^output_projection\.weight$", "model.tie_embeddings"),
    (r"^tgt_embed\.token\.weight$", "model.share_embeddings"),
    (r"^cls$", "classifier.pooling"),
)


# where each size of the record shows in the tensors: (name pattern, axis, field), every match
# checked, in this order (the vocabulary before the width it is read beside): the field hints
# above, with the embedding's width
_SIZES = (_AXES[0], (_AXES[0][0], 1, "model.d_model"), *_AXES[1:])
_LAYERS = ((r"^encoder\.layers\.(\d+)\.", "encoder", "model.num_encoder_layers"),
           (r"^decoder\.layers\.(\d+)\.", "decoder", "model.num_decoder_layers"))


def _record_value(record: RunRecord, field: str) -> int | None:
    section, _, name = field.partition(".")
    owner = record.classifier if section == "classifier" else record.model
    return getattr(owner, name, None) if owner is not None else None


def check_record(record: RunRecord, path: Path | str) -> None:
    """InputError (one line naming ``path``, a tensor and the field of ``record`` behind it)
    when the sizes ``record`` describes are not those of the tensors in the weights file's
    header. Reads the header only and builds nothing; :func:`check_weights` then compares every
    tensor of the model built."""
    path = Path(path)
    shapes = header_shapes(path)
    differs = f"{path} does not match the model of {record.source}"
    for pattern, axis, field in _SIZES:
        want = _record_value(record, field)
        for name in sorted(n for n in shapes if re.search(pattern, n)):
            have = shapes[name]
            if want is not None and len(have) > axis and have[axis] != want:
                raise InputError(f"{differs}: {name} has shape {list(have)} ({field} is {want})")
    for pattern, stack, field in _LAYERS:
        want = _record_value(record, field)
        if stack == "decoder" and not record.is_translation:
            continue  # a classifier has no decoder, whatever its shape says
        found = {int(m.group(1)) for n in shapes if (m := re.search(pattern, n))}
        if want is not None and len(found) != want:
            raise InputError(f"{differs}: it holds {len(found)} {stack} layers ({field} is {want})")


def save_weights(model: nn.Module, path: Path | str) -> None:
    """Write ``model``'s state to a safetensors file atomically; a tied tensor is stored once."""
    from safetensors.torch import save_model

    atomic_write(path, lambda tmp: save_model(model, str(tmp)))


def _aliases(model: nn.Module) -> list[set[str]]:
    """Groups of state-dict names that share storage (tied or shared embeddings)."""
    groups: dict[tuple, set[str]] = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        groups.setdefault(key, set()).add(name)
    return list(groups.values())


def _setting(model: nn.Module, field: str) -> str:
    """`` (model.d_model is 512)``: the configuration value behind a mismatch, for the message."""
    section, _, name = field.partition(".")
    owner = model if section == "classifier" else getattr(model, "config", None)
    value = getattr(owner, name, None)
    return "" if value is None else f" ({field} is {value!r})"


def _axis_field(name: str, axis: int) -> str:
    for pattern, at, field in _AXES:
        if at == axis and re.search(pattern, name):
            return field
    return "classifier.pooling" if name == "cls" and axis < 2 else "model.d_model"


def _presence_field(name: str) -> str | None:
    return next((field for pattern, field in _SWITCHES if re.search(pattern, name)), None)


def header_shapes(path: Path | str) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape, from the file's header only; InputError when missing or unreadable.
    (safetensors checks that the header's offsets cover the file exactly, so a header cannot
    claim more data than the file holds.) A well-formed header is read here, in plain Python
    (safetensors' reader needs numpy: a tenth of a second at every start); anything else is
    left to safetensors, whose own words the error carries."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: missing weights file")
    shapes = _plain_header(path)
    if shapes is not None:
        return shapes
    try:
        with safe_open(str(path), framework="numpy") as f:
            return {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}  # noqa: SIM118
    except Exception as err:  # safetensors raises its own error types for a bad header
        raise InputError(f"{path}: not a readable safetensors file ({first_line(err)})") from None


# bytes per element of safetensors' dtypes
_ITEM_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
               "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
_MAX_HEADER = 100_000_000  # safetensors' own bound


def _unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object, refused (ValueError) where a name repeats."""
    if len({name for name, _ in pairs}) != len(pairs):
        raise ValueError("a name repeats")
    return dict(pairs)


def _plain_header(path: Path) -> dict[str, tuple[int, ...]] | None:
    """The shapes of a header that holds what safetensors would accept (an 8-byte length, a JSON
    object of tensors whose byte ranges, in order, tile the data exactly and fit their dtype and
    shape), or None for anything else."""
    total = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        size = int.from_bytes(head, "little") if len(head) == 8 else -1
        if not 0 < size <= min(_MAX_HEADER, total - 8):
            return None
        try:
            header = json.loads(f.read(size), object_pairs_hook=_unique)
        except (UnicodeDecodeError, ValueError):
            return None
    meta = header.get("__metadata__", {}) if isinstance(header, dict) else None
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        return None
    data = total - 8 - size
    spans, shapes = [], {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            shape, (start, end), item = entry["shape"], entry["data_offsets"], _ITEM_BYTES[entry["dtype"]]
        except (KeyError, TypeError, ValueError):
            return None
        if not (isinstance(shape, list) and all(type(n) is int and n >= 0 for n in (*shape, start, end))
                and end - start == math.prod(shape) * item):
            return None
        spans.append((start, end))
        shapes[name] = tuple(shape)
    spans.sort()
    ends = [0] + [end for _, end in spans]
    if any(start != ends[k] for k, (start, _) in enumerate(spans)) or ends[-1] != data:
        return None
    return shapes


def check_weights(model: nn.Module, path: Path | str, *, against: str = "config.json") -> None:
    """InputError (one line naming ``path``, the tensor and the configuration field behind it)
    unless the file holds exactly the tensors of ``model`` with its shapes. Reads the header only."""
    path = Path(path)
    shapes = header_shapes(path)
    state = model.state_dict()
    differs = f"{path} does not match the model of {against}"
    for group in _aliases(model):
        present = [name for name in group if name in shapes]
        if not present:
            name = sorted(group)[0]
            field = _presence_field(name)
            hint = _setting(model, field) if field else ""
            raise InputError(f"{differs}: tensor {name} is missing{hint}")
        for name in present:
            want = tuple(state[name].shape)
            have = shapes[name]
            if have != want:
                axes = [i for i, (h, w) in enumerate(zip(have, want, strict=False)) if h != w]
                hint = _setting(model, _axis_field(name, axes[0])) if axes and len(have) == len(want) else ""
                raise InputError(f"{differs}: {name} has shape {list(have)}, the configuration "
                                 f"needs {list(want)}{hint}")
    extra = sorted(set(shapes) - set(state))
    if extra:
        field = _presence_field(extra[0])
        hint = _setting(model, field) if field else ""
        raise InputError(f"{differs}: unexpected tensor {extra[0]}{hint}")


def load_weights(model: nn.Module, path: Path | str, *, against: str = "config.json") -> None:
    """Load a safetensors file into ``model`` in place.

    Raises InputError (one line naming ``path``) if the file is missing, corrupt, or holds tensors
    of other names or shapes than the model built from ``against`` needs (:func:`check_weights`).
    """
    from safetensors.torch import load_model

    check_weights(model, path, against=against)
    try:
        load_model(model, str(path), strict=True)
    except Exception as err:  # the header was read above: a read error, or a file replaced since
        raise InputError(f"{path}: cannot read the weights ({first_line(err)})") from None
