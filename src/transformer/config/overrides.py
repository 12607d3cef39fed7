"""The one way to change a configuration: ``apply_overrides(config, {"model.d_model": 128, "lr": 1e-3})``.

The command line turns its flags into such a mapping and calls this function; the Python API calls
it directly, so a flag and a key always mean the same thing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from transformer.config.model import ModelConfig

C = TypeVar("C")

# "model.layers": every layer stack the model has (a classifier has only the encoder's)
LAYERS = "layers"


def apply_overrides(config: C, overrides: Mapping[str, Any]) -> C:
    """A copy of the frozen dataclass ``config`` with ``overrides`` applied (and validated).

    A key is a field name (``"lr"``) or a dotted path into a nested configuration
    (``"model.d_model"``). On a ModelConfig the key ``layers`` sets ``num_encoder_layers`` and,
    when the model has a decoder, ``num_decoder_layers``; an explicit per-stack key wins. Values are
    taken as given (``None`` included). An unknown key raises ``ValueError`` naming it.
    """
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"expected a configuration dataclass, got {type(config).__name__}")
    direct: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for key, value in overrides.items():
        head, dot, rest = key.partition(".")
        if dot:
            nested.setdefault(head, {})[rest] = value
        else:
            direct[key] = value
    if isinstance(config, ModelConfig) and LAYERS in direct:
        layers = direct.pop(LAYERS)
        direct.setdefault("num_encoder_layers", layers)
        if config.num_decoder_layers > 0:
            direct.setdefault("num_decoder_layers", layers)
    names = {f.name for f in dataclasses.fields(config)}
    unknown = sorted({*direct, *nested} - names)
    if unknown:
        raise ValueError(f"unknown {type(config).__name__} field: {', '.join(unknown)}")
    for head, changes in nested.items():
        inner = direct.get(head, getattr(config, head))
        direct[head] = apply_overrides(inner, changes)
    return dataclasses.replace(config, **direct) if direct else config  # type: ignore[type-var]
