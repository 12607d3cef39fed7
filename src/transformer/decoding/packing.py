"""Pre-packed linear weights for cached decoding on a CPU (oneDNN's blocked weight layout).

A cached decoding step multiplies a handful of rows (sentences x beams, one new token each) by
every weight matrix of the decoder and by the output projection. For such skinny products a GEMM
spends much of its time rearranging the weight matrix into the blocked layout its kernel reads,
and ``F.linear`` repeats that at every call. oneDNN (PyTorch's ``mkldnn`` backend) can reorder a
weight once and reuse it for inputs of any number of rows: ``torch.ops.mkldnn._reorder_linear_weight``
and ``torch.ops.mkldnn._linear_pointwise``, the pair ``torch.compile`` uses for frozen CPU weights.
At 16 rows this makes the 8000 x 256 output projection 2.4x faster and the decoder's own
matrices 1.3-1.9x (``benchmarks/decoding.py`` measures the whole step).

:func:`step_linear` gives the function a decoding step calls instead of a module: the packed
product, or plain ``F.linear``. The modules and their weights are never changed; the packed copy
belongs to whoever asked for it (the :class:`~transformer.decoding.fast_decoder.FastDecoder`),
and goes with it. Results equal ``F.linear``'s up to float32 rounding (a different summation
order).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

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


def _packed_linear(weight: Tensor, bias: Tensor | None, x: Tensor) -> Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def step_linear(module: nn.Module, *, pack: bool) -> Callable[[Tensor], Tensor]:
    """``x (..., in) -> (..., out)``, what ``module(x)`` computes, for a decoding step.

    An ``nn.Linear`` becomes a direct call, with ``pack`` on its float32 weight reordered once for
    oneDNN (a copy made here, so the result holds it; inputs must then be float32 on the CPU), or
    plain ``F.linear``; any other module (a quantized linear) is called as it is.
    """
    if not isinstance(module, nn.Linear):
        return module
    if pack:
        with torch.no_grad():
            packed = torch.ops.mkldnn._reorder_linear_weight(module.weight.detach())
        return functools.partial(_packed_linear, packed, module.bias)
    return functools.partial(F.linear, weight=module.weight, bias=module.bias)
