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
  different summation order), faster from a number of rows that depends on the weight and the
  CPU (on Zen 4 about 16, 2-4 for an output projection), slower below: the call costs tens of
  microseconds before any arithmetic;
- int8 (``precision="int8"``): the weight quantized once to int8, symmetric per output row, and
  prepacked for PyTorch's own dynamic-quantization kernel (fbgemm/x86 on x86, qnnpack on ARM):
  each call quantizes its input rows to 8 bits on the fly, multiplies in integers and rescales
  to float32. It reads a quarter of the bytes, so it wins on a large weight (the output
  projection: 3-7x at 1 row) and from about 8 rows on the others; close to float32's results, not equal (tests state the
  tolerance).

:func:`step_linear` gives the function a decoding step calls instead of a module: the chosen
product for the rows of each call, by the crossovers measured for this kind of CPU
(:mod:`transformer.decoding.thresholds`). The modules and their weights are never changed; the
packed copies belong to whoever asked for them (the
:class:`~transformer.decoding.fast_decoder.FastDecoder`), and go with it.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer import hardware
from transformer.decoding import thresholds as _thresholds
from transformer.decoding.thresholds import DecodingThresholds


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


def int8_engine() -> str | None:
    """The quantized engine int8 decoding uses here: x86 or fbgemm on x86, qnnpack on ARM
    (:attr:`transformer.hardware.CpuInfo.int8_engine`); None when PyTorch has none for this CPU."""
    return hardware.detect_cpu().int8_engine


# fbgemm/x86's AVX2 kernel sums pairs of u8 x s8 products in int16, which 8-bit activations can
# overflow: they take 7 bits (reduce_range). qnnpack accumulates in int32 and ignores the flag
# today (PyTorch warns that this may change): it gets 8 bits.
REDUCE_RANGE = {"x86": True, "fbgemm": True, "qnnpack": False}

# PyTorch's quantized engine is one setting for the whole process: packing sets it for a moment
# and puts it back, under a lock so that two threads packing at once (two decoders built on two
# threads) cannot put the setting back under each other's prepack.
_ENGINE_LOCK = threading.Lock()


@contextlib.contextmanager
def quantized_engine(engine: str) -> Iterator[None]:
    """``torch.backends.quantized.engine`` set to ``engine`` inside the block, and put back as it
    was after it: the one place int8 decoding touches that process-wide setting.

    ``torch.ops.quantized.linear_prepack`` packs for the engine in force (fbgemm/x86's layout or
    qnnpack's); the packed weight then carries its engine's kernel, so
    ``torch.ops.quantized.linear_dynamic`` computes the same whatever engine is in force when it
    runs (``tests/decoding/test_int8.py`` checks it). Decoding therefore needs the engine only
    while it packs, and leaves the rest of the process (a user's own quantized models) alone.
    """
    with _ENGINE_LOCK:
        before = torch.backends.quantized.engine
        torch.backends.quantized.engine = engine
        try:
            yield
        finally:
            torch.backends.quantized.engine = before


@dataclass(frozen=True)
class Int8Weight:
    """A weight quantized and prepacked for one engine, and how its inputs are quantized."""

    packed: torch.ScriptObject  # for torch.ops.quantized.linear_dynamic
    engine: str  # torch.backends.quantized.engine it was packed for
    reduce_range: bool  # 7-bit activations


def int8_linear_weight(module: nn.Linear) -> Int8Weight:
    """``module``'s weight quantized to int8 (symmetric, one scale per output row: fbgemm and
    qnnpack both take it) and its float bias, prepacked for ``torch.ops.quantized.linear_dynamic``
    under :func:`int8_engine` (set only while it packs: :func:`quantized_engine`)."""
    engine = int8_engine()
    if engine is None:
        raise ValueError("int8 decoding needs PyTorch's x86, fbgemm or qnnpack quantized engine "
                         f"(this build has {torch.backends.quantized.supported_engines})")
    with quantized_engine(engine), torch.no_grad():  # prepack packs for the engine in force
        weight = module.weight.detach().float()
        scale = (weight.abs().amax(dim=1) / 127.0).clamp_min(1e-12).double()  # (out,)
        zero = torch.zeros(weight.size(0), dtype=torch.long)
        with warnings.catch_warnings():  # PyTorch marks quantized tensors deprecated, not removed
            warnings.simplefilter("ignore", UserWarning)
            qweight = torch.quantize_per_channel(weight, scale, zero, 0, torch.qint8)
        bias = module.bias.detach().float() if module.bias is not None else None
        packed = torch.ops.quantized.linear_prepack(qweight, bias)
    return Int8Weight(packed, engine, REDUCE_RANGE.get(engine, False))


def _int8_linear(weight: Int8Weight, x: Tensor) -> Tensor:
    return torch.ops.quantized.linear_dynamic(x, weight.packed, weight.reduce_range)


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
# product is bound by reading it (4 bytes an element in float32, 1 in int8). The crossovers depend
# on the CPU (transformer.decoding.thresholds: big_weight, pack_min_work, pack_min_work_big,
# pack_min_rows_big, int8_min_work). On Zen 4 (AVX-512, 1 thread, torch 2.13; benchmarks/decoding.py --suite
# kernels, and whole searches): int8 is 1.3-1.5x float32 at one row for the 768 x 256 and
# 1024 x 256 weights of d_model 256, 2.2-2.8x for an 8000-word output projection, and below
# float32 for d_model 128's 128 x 128 up to 32 rows; at one row a d_model 256 greedy search is
# 1.2x faster with the transposed copies of its big weights than with F.linear, while for small
# weights F.linear is as fast or faster; MKL's product slows down with rows much sooner than
# oneDNN's packed one (768 x 256: packed 1.5x from 4 rows; an output projection 2-3x at 4 rows).


def step_linear(module: nn.Module, *, pack: bool, int8: bool = False,
                thresholds: DecodingThresholds | None = None) -> Callable[[Tensor], Tensor]:
    """``x (R, ..., in) -> (R, ..., out)``, what ``module(x)`` computes, for a decoding step.

    An ``nn.Linear`` becomes a direct call, by the rows R it is given: with ``int8``, its weight
    quantized and prepacked once (:func:`int8_linear_weight`) for at least ``int8_min_work /
    weight elements`` rows (any number for a weight of ``big_weight`` elements or more); with
    ``pack``, its float32 weight reordered once for oneDNN (a copy made here, so the result holds
    it; inputs must be float32 on the CPU) from ``pack_min_work / weight elements`` rows (for a big
    weight ``pack_min_work_big / weight elements``, at least ``pack_min_rows_big``); fewer rows
    take plain ``F.linear``, or for a big weight one ``addmm`` on the weight transposed once
    (:func:`_transposed_linear`, also a copy the result holds). Without ``pack`` or ``int8``, plain ``F.linear``. Any other module (a
    quantized linear) is called as it is. The crossovers are ``thresholds``' (None: this
    machine's, :func:`~transformer.decoding.thresholds.decoding_thresholds`).
    """
    if not isinstance(module, nn.Linear):
        return module
    t = _thresholds.decoding_thresholds() if thresholds is None else thresholds
    size = module.weight.numel()
    big = size >= t.big_weight
    plain = functools.partial(F.linear, weight=module.weight, bias=module.bias)
    if int8:
        fast = functools.partial(_int8_linear, int8_linear_weight(module))
        return fast if big else _by_rows(plain, fast, min_rows=-(-t.int8_min_work // size))
    if not pack:
        return plain
    with torch.no_grad():  # float32 on the CPU: copies owned by the result
        packed = torch.ops.mkldnn._reorder_linear_weight(module.weight.detach())
        if big:
            plain = functools.partial(_transposed_linear, module.weight.detach().t().contiguous(),
                                      module.bias)
    fast = functools.partial(_packed_linear, packed, module.bias)
    work = t.pack_min_work_big if big else t.pack_min_work
    min_rows = max(t.pack_min_rows_big if big else 1, -(-work // size))
    return _by_rows(plain, fast, min_rows=min_rows)


def _by_rows(plain: Callable[[Tensor], Tensor], fast: Callable[[Tensor], Tensor], *,
             min_rows: int) -> Callable[[Tensor], Tensor]:
    if min_rows <= 1:
        return fast

    def linear(x: Tensor) -> Tensor:
        return fast(x) if x.size(0) >= min_rows else plain(x)

    return linear
