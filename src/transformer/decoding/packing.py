"""The products of a cached decoding step on a CPU: plain, pre-packed for oneDNN, or int8.

A cached decoding step multiplies a handful of rows (sentences x beams, one new token each) by
every weight matrix of the decoder and by the output projection. Three ways to do it, each the
fastest somewhere (``benchmarks/decoding.py --suite kernels`` measures them by rows):

- plain products (MKL): the least fixed cost a call, so the fastest at a few rows; one ``addmm``
  on the weight transposed once (row-major in x out) rather than ``F.linear`` on the model's
  (out x in) weight, which costs three times the operator calls and reads the weight across;
- oneDNN's packed weights: for skinny products a GEMM spends much of its time rearranging the
  weight into the blocked layout its kernel reads, and ``F.linear`` repeats that every call;
  oneDNN (PyTorch's ``mkldnn`` backend) can reorder a weight once and reuse it for inputs of any
  number of rows (``torch.ops.mkldnn._reorder_linear_weight`` and ``_linear_pointwise``, the pair
  ``torch.compile`` uses for frozen CPU weights). Equal to ``F.linear`` up to float32 rounding (a
  different summation order), faster from about 16 rows (4 for an output projection), slower
  below: the call costs tens of microseconds before any arithmetic;
- int8 (``precision="int8"``): the weight quantized once to int8, symmetric per output row, and
  prepacked for PyTorch's own dynamic-quantization kernel (fbgemm/x86): each call quantizes its
  input rows to 8 bits on the fly, multiplies in integers and rescales to float32. It reads a
  quarter of the bytes, so it wins on a large weight (the output projection: 3-7x at 1 row) and
  from about 8 rows on the others; close to float32's results, not equal (tests state the
  tolerance).

:func:`step_linear` gives the function a decoding step calls instead of a module: the chosen
product for the rows of each call. The modules and their weights are never changed; the packed
copies belong to whoever asked for them (the
:class:`~transformer.decoding.fast_decoder.FastDecoder`), and go with it.
"""

from __future__ import annotations

import functools
import warnings
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


INT8_ENGINES = ("x86", "fbgemm")  # PyTorch's server-CPU int8 GEMM backends, best first


def int8_engine() -> str | None:
    """The quantized engine int8 decoding uses here, or None when PyTorch has none for this CPU."""
    supported = torch.backends.quantized.supported_engines
    return next((e for e in INT8_ENGINES if e in supported), None)


def int8_linear_weight(module: nn.Linear) -> torch.ScriptObject:
    """``module``'s weight quantized to int8 (symmetric, one scale per output row) and its float
    bias, prepacked for ``torch.ops.quantized.linear_dynamic``."""
    engine = int8_engine()
    if engine is None:
        raise ValueError("int8 decoding needs PyTorch's x86 or fbgemm quantized engine "
                         f"(this build has {torch.backends.quantized.supported_engines})")
    torch.backends.quantized.engine = engine
    with torch.no_grad():
        weight = module.weight.detach().float()
        scale = (weight.abs().amax(dim=1) / 127.0).clamp_min(1e-12).double()  # (out,)
        zero = torch.zeros(weight.size(0), dtype=torch.long)
        with warnings.catch_warnings():  # PyTorch marks quantized tensors deprecated, not removed
            warnings.simplefilter("ignore", UserWarning)
            qweight = torch.quantize_per_channel(weight, scale, zero, 0, torch.qint8)
        bias = module.bias.detach().float() if module.bias is not None else None
        return torch.ops.quantized.linear_prepack(qweight, bias)


def _int8_linear(packed: torch.ScriptObject, x: Tensor) -> Tensor:
    # reduce_range: 7-bit activations, so that the int16 sums of the AVX2 kernel cannot overflow
    return torch.ops.quantized.linear_dynamic(x, packed, True)


def _transposed_linear(weight_t: Tensor, bias: Tensor | None, x: Tensor) -> Tensor:
    """``F.linear(x, weight, bias)`` from ``weight_t = weight.t().contiguous()``: one ``addmm`` on
    a row-major (in, out) matrix, which MKL multiplies 1.4-1.6x faster than ``F.linear``'s call on
    the transposed view for an output projection (8000 x 128 or x 256) at one or two rows."""
    rows = x.reshape(-1, x.size(-1))
    out = torch.mm(rows, weight_t) if bias is None else torch.addmm(bias, rows, weight_t)
    return out.view(*x.shape[:-1], weight_t.size(1))


def _packed_linear(weight: Tensor, bias: Tensor | None, x: Tensor) -> Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


# Which product a step takes, by the weight's size and the rows it multiplies (sentences x beams):
# oneDNN's packed product and the int8 kernel each cost 10-15 microseconds a call before any
# arithmetic, so a small weight at a few rows is fastest in plain F.linear, while a big weight's
# product is bound by reading it (4 bytes an element in float32, 1 in int8). Measured on a 2-core
# AMD EPYC, 1 thread, torch 2.13 (benchmarks/decoding.py --suite kernels, and whole searches): int8
# is 1.3-1.5x float32 at one row for the 768 x 256 and 1024 x 256 weights of d_model 256, 2.2-2.8x
# for an 8000-word output projection, and below float32 for d_model 128's 128 x 128 up to 32 rows;
# at one row a d_model 256 greedy search is 1.2x faster with the transposed copies of its big
# weights than with F.linear, while for small weights F.linear is as fast or faster. On a quiet
# machine (the other core idle) MKL's product slows down with rows much sooner than oneDNN's: the
# packed product wins once rows x weight elements reach about 3 x 2^18 (the d_model 128
# Q/K/V weight from 16 rows, 1.1x; 128 x 128 from about 48; 768 x 256 from 4, 1.5x; an output
# projection from 2 rows, 2-3x at 4 rows).
BIG_WEIGHT = 1 << 17  # elements: d_model 256's projections and feed-forward layers, output layers
PACK_MIN_WORK = 3 << 18  # packed float32 once rows x weight elements reach this
PACK_MIN_ROWS_BIG = 2  # and never below this many rows for a big weight (1 row: its transposed copy)
# int8 once rows x weight elements reach 2^19 (a big weight: always): from 11 rows for d_model
# 128's Q/K/V weight, 8 for 256 x 256; whole int8 searches of 4 sentences 1.05-1.10x faster
# than from 3 x 2^18, batch 16 unchanged (in-process A/B, quiet machine)
INT8_MIN_WORK = 1 << 19


def step_linear(module: nn.Module, *, pack: bool, int8: bool = False) -> Callable[[Tensor], Tensor]:
    """``x (R, ..., in) -> (R, ..., out)``, what ``module(x)`` computes, for a decoding step.

    An ``nn.Linear`` becomes a direct call, by the rows R it is given: with ``int8``, its weight
    quantized and prepacked once (:func:`int8_linear_weight`) for at least ``INT8_MIN_WORK /
    weight elements`` rows (any number for a weight of ``BIG_WEIGHT`` elements or more); with
    ``pack``, its float32 weight reordered once for oneDNN (a copy made here, so the result holds
    it; inputs must be float32 on the CPU) from ``PACK_MIN_WORK / weight elements`` rows (at least
    ``PACK_MIN_ROWS_BIG`` for a big weight); fewer rows take plain ``F.linear``, or for a big weight one ``addmm`` on
    the weight transposed once (:func:`_transposed_linear`, also a copy the result holds). Without
    ``pack`` or ``int8``, plain ``F.linear``. Any other module (a quantized linear) is called as it is.
    """
    if not isinstance(module, nn.Linear):
        return module
    size = module.weight.numel()
    big = size >= BIG_WEIGHT
    plain = functools.partial(F.linear, weight=module.weight, bias=module.bias)
    if int8:
        fast = functools.partial(_int8_linear, int8_linear_weight(module))
        return fast if big else _by_rows(plain, fast, min_rows=-(-INT8_MIN_WORK // size))
    if not pack:
        return plain
    with torch.no_grad():  # float32 on the CPU: copies owned by the result
        packed = torch.ops.mkldnn._reorder_linear_weight(module.weight.detach())
        if big:
            plain = functools.partial(_transposed_linear, module.weight.detach().t().contiguous(),
                                      module.bias)
    fast = functools.partial(_packed_linear, packed, module.bias)
    return _by_rows(plain, fast, min_rows=max(PACK_MIN_ROWS_BIG if big else 1, -(-PACK_MIN_WORK // size)))


def _by_rows(plain: Callable[[Tensor], Tensor], fast: Callable[[Tensor], Tensor], *,
             min_rows: int) -> Callable[[Tensor], Tensor]:
    if min_rows <= 1:
        return fast

    def linear(x: Tensor) -> Tensor:
        return fast(x) if x.size(0) >= min_rows else plain(x)

    return linear
