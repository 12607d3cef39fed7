"""Pre-packed decoder weights for cached decoding on a CPU (oneDNN's blocked weight layout).

A cached decoding step multiplies a handful of rows (sentences x beams, one new token each) by
every weight matrix of the decoder and by the output projection. For such skinny products a GEMM
spends much of its time rearranging the weight matrix into the blocked layout its kernel reads,
and ``F.linear`` repeats that at every call. oneDNN (PyTorch's ``mkldnn`` backend) can reorder a
weight once and reuse it for inputs of any number of rows: ``torch.ops.mkldnn._reorder_linear_weight``
and ``torch.ops.mkldnn._linear_pointwise``, the pair ``torch.compile`` uses for frozen CPU weights.
At 16 rows this makes the 8000 x 256 output projection 2.4x faster and the decoder's own
matrices 1.3-1.9x (``benchmarks/decoding.py`` measures the whole step).

:class:`PackedLinears` reorders the float32 weights of a list of ``nn.Linear`` modules; while it is
entered, those modules compute with the reordered copies (the weights themselves are never
changed, and on exit the modules are as before). The copies are kept for the next entry and made
again only when a weight has changed. :func:`packed_decoder` keeps one ``PackedLinears`` per
model (held weakly: it goes when the model goes), so decoding batch after batch, by the
:class:`~transformer.decoding.translator.Translator` or by calling ``greedy_decode`` or
``beam_search`` again, packs once (for the d256 model of ``benchmarks/decoding.py``, 16 ms, or
4% of a beam search of 16 sentences to 25 tokens); the price is a second copy of those weights
while the model lives (:func:`forget_packed` drops it sooner). A decoding call inside an entered
``PackedLinears`` packs nothing more.
Results equal ``F.linear``'s up to float32 rounding (a different summation order).
"""

from __future__ import annotations

import contextlib
import functools
import weakref
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
    """Reordered copies of the weights of ``linears``, used while entered (see the module
    docstring)."""

    def __init__(self, linears: list[nn.Linear]) -> None:
        for linear in linears:
            if not isinstance(linear, nn.Linear):
                raise ValueError(f"PackedLinears packs nn.Linear modules, got {type(linear).__name__}")
        self.linears = linears
        self.packs = 0  # how many times the copies were made
        self._packed: list[Tensor] = []
        self._packed_from: list[tuple[int, int]] = []  # (id, in-place version) of each weight

    def _weights_seen(self) -> list[tuple[int, int]]:
        return [(id(linear.weight), linear.weight._version) for linear in self.linears]

    def _forward(self, index: int, x: Tensor) -> Tensor:
        linear = self.linears[index]
        if x.dtype != torch.float32:
            return F.linear(x, linear.weight, linear.bias)
        return torch.ops.mkldnn._linear_pointwise(x, self._packed[index], linear.bias, "none", [], "")

    def __enter__(self) -> PackedLinears:
        seen = self._weights_seen()
        if seen != self._packed_from:  # first entry, or an optimizer step / load since the last
            with torch.no_grad():
                self._packed = [torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach())
                                for linear in self.linears]
            self._packed_from = seen
            self.packs += 1
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


def decoder_linears(model: nn.Module) -> list[nn.Linear] | None:
    """The Linear modules that every cached decoding step uses: the decoder's, except
    cross-attention's key/value projection (it runs once), and the output projection. None when
    packing does not apply (:func:`can_pack`, or a model without them)."""
    decoder = getattr(model, "decoder", None)
    projection = getattr(model, "output_projection", None)
    if not (isinstance(decoder, nn.Module) and isinstance(projection, nn.Linear) and can_pack(model)):
        return None
    linears = [m for name, m in decoder.named_modules()
               if isinstance(m, nn.Linear) and name.rpartition(".")[2] != "kv_proj"]
    return [*linears, projection]


_PACKERS: weakref.WeakKeyDictionary[nn.Module, PackedLinears] = weakref.WeakKeyDictionary()


def decoder_packer(model: nn.Module) -> PackedLinears | None:
    """The model's :class:`PackedLinears` of :func:`decoder_linears` (the same one at every call
    while those modules stay the model's), or None when packing does not apply."""
    linears = decoder_linears(model)
    if linears is None:
        return None
    packer = _PACKERS.get(model)
    if packer is None or packer.linears != linears:
        packer = _PACKERS[model] = PackedLinears(linears)
    return packer


def forget_packed(model: nn.Module) -> None:
    """Drop the model's packed copies, for a caller that changes the weights before it decodes
    again (training between validations): they would be stale, and hold memory meanwhile."""
    _PACKERS.pop(model, None)


@contextlib.contextmanager
def packed_decoder(model: nn.Module, *, enabled: bool = True) -> Iterator[PackedLinears | None]:
    """Pack :func:`decoder_linears` while the block runs (with the model's :func:`decoder_packer`,
    so that weights unchanged since the last call are not packed again), when ``enabled`` and
    packing applies and the caller has not packed them already; yields the packer or None."""
    packer = decoder_packer(model) if enabled else None
    if packer is None or any("forward" in linear.__dict__ for linear in packer.linears):
        yield None
        return
    with packer:
        yield packer
