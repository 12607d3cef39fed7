"""Pre-packed decoder weights for cached decoding on a CPU (oneDNN's blocked weight layout).

A cached decoding step multiplies a handful of rows (sentences x beams, one new token each) by
every weight matrix of the decoder and by the output projection. For such skinny products a GEMM
spends much of its time rearranging the weight matrix into the blocked layout its kernel reads,
and ``F.linear`` repeats that at every call. oneDNN (PyTorch's ``mkldnn`` backend) can reorder a
weight once and reuse it for inputs of any number of rows: ``torch.ops.mkldnn._reorder_linear_weight``
and ``torch.ops.mkldnn._linear_pointwise``, the pair ``torch.compile`` uses for frozen CPU weights.
At 16 rows this makes the 8000 x 256 output projection 2.4x faster and the decoder's own
matrices 1.3-1.9x (``benchmarks/decoding.py`` measures the whole step).

:class:`PackedLinears` reorders the float32 weights of a list of ``nn.Linear`` modules while it is
entered; those modules then compute with the reordered copies (the weights themselves are never
changed, and on exit the modules are as before). Results equal ``F.linear``'s up to float32
rounding (a different summation order).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from types import TracebackType

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def packing_available() -> bool:
    """Whether this PyTorch build has oneDNN's linear with reordered weights."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def can_pack(model: nn.Module) -> bool:
    """Packing applies to float32 weights on the CPU outside autocast, with oneDNN present."""
    weight = next(model.parameters(), None)
    return (
        weight is not None
        and weight.device.type == "cpu"
        and weight.dtype == torch.float32
        and not torch.is_autocast_enabled("cpu")
        and packing_available()
    )


class PackedLinears:
    """Reordered copies of the weights of ``linears`` while entered (see the module docstring)."""

    def __init__(self, linears: list[nn.Linear]) -> None:
        for linear in linears:
            if not isinstance(linear, nn.Linear):
                raise ValueError(f"PackedLinears packs nn.Linear modules, got {type(linear).__name__}")
        self.linears = linears
        self._packed: list[Tensor] = []

    def _forward(self, index: int, x: Tensor) -> Tensor:
        linear = self.linears[index]
        if x.dtype != torch.float32 or x.device.type != "cpu":
            return F.linear(x, linear.weight, linear.bias)
        return torch.ops.mkldnn._linear_pointwise(x, self._packed[index], linear.bias, "none", [], "")

    def __enter__(self) -> PackedLinears:
        with torch.no_grad():
            self._packed = [torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach())
                            for linear in self.linears]
        # an instance attribute shadows the class's forward; deleting it restores the module
        for i, linear in enumerate(self.linears):
            linear.forward = functools.partial(self._forward, i)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for linear in self.linears:
            linear.__dict__.pop("forward", None)
        self._packed = []


@contextlib.contextmanager
def packed_decoder(model: nn.Module, *, enabled: bool = True) -> Iterator[PackedLinears | None]:
    """Pack the Linear weights that every cached decoding step uses (the decoder's, except
    cross-attention's key/value projection, which runs once, and the output projection) while the
    block runs, when ``enabled`` and :func:`can_pack` allow it; yields the packer or None."""
    decoder = getattr(model, "decoder", None)
    projection = getattr(model, "output_projection", None)
    if not (enabled and isinstance(decoder, nn.Module) and isinstance(projection, nn.Linear)
            and can_pack(model)):
        yield None
        return
    linears = [m for name, m in decoder.named_modules()
               if isinstance(m, nn.Linear) and name.rpartition(".")[2] != "kv_proj"]
    with PackedLinears([*linears, projection]) as packer:
        yield packer
