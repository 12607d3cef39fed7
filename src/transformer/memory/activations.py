"""What autograd saves for the backward pass, sub-layer by sub-layer, in bytes.

Each tensor is counted with its dtype: autocast keeps matmul outputs in 16 bits and LayerNorm,
residual sums and the loss in 32. Dropout masks are a byte per element on CUDA (fused dropout
keeps a bool mask) and the activation's dtype on the CPU.

Shapes: B batch, S source length, T target length, D d_model, F d_ff, H heads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from transformer.config import ModelConfig
from transformer.hardware import detect_cpu
from transformer.memory.setting import FP32


@dataclass(frozen=True)
class ElementBytes:
    """Bytes per element of each kind of saved tensor for a precision and device."""

    act: int  # matmul and attention outputs (16 bits under autocast)
    mask16: int  # dropout mask of a matmul output
    mask32: int  # dropout mask of a float32 tensor (the embeddings)
    cuda: bool
    spelled_out: bool = False  # 16-bit attention through matmul + softmax (model/attention.py)
    sms: int = 0  # the CUDA device's multiprocessors (sizes the sum kernel's staging buffer)

    @classmethod
    def of(cls, precision: str, device: str, *, native_bf16: bool | None = None) -> ElementBytes:
        """``native_bf16``: the CPU's (default: this machine's), which decides how 16-bit
        attention runs on a CPU and so what it saves."""
        act = FP32 if precision == "fp32" else 2
        cuda = device == "cuda"
        if native_bf16 is None:
            native_bf16 = detect_cpu().native_bf16
        spelled_out = not cuda and act < FP32 and native_bf16  # model/attention.py's rule
        # CUDA's fused dropout keeps a bool mask; the CPU keeps a mask of the input's dtype.
        return cls(act=act, mask16=1 if cuda else act, mask32=1 if cuda else FP32, cuda=cuda,
                   spelled_out=spelled_out, sms=cuda_multiprocessors() if cuda else 0)


# H100 and H200 (SXM) have 132 multiprocessors; the estimate assumes them with no GPU at hand
ASSUMED_SMS = 132


def cuda_multiprocessors() -> int:
    """This machine's CUDA device's multiprocessor count, or :data:`ASSUMED_SMS` without one."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return ASSUMED_SMS


def _floor_pow2(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def sum_staging_bytes(rows: int, cols: int, by: ElementBytes, *, threads_per_sm: int = 2048) -> int:
    """The float32 staging buffer CUDA's sum kernel takes from the caching allocator to sum a
    contiguous (rows, cols) gradient over its rows, as a bias's gradient is summed over the tokens;
    0 on the CPU or when the kernel needs none.

    It is scratch, freed when the kernel ends, but ``max_memory_allocated`` counts it, and it can
    be 4x the gradient it sums. The size follows ATen's ``setReduceConfig`` (Reduce.cuh) for a
    reduction that is not along the fastest dimension: outputs in 4-wide vectors, a block of 32
    lanes over outputs by up to 4 warps over rows, and the rows split across up to
    ``rows / (4 * 16)`` blocks (fewer when the device is already full), each staging a partial sum
    per lane and vector slot. Checked on an H200 against the allocator's trace: 16, 48 and 64 MiB
    for 256, 768 and 1,024 columns at 8,192 rows (tests/gpu/test_memory.py measures the steps).
    """
    if not by.cuda:
        return 0
    vec = 4 if cols % 4 == 0 else 2 if cols % 2 == 0 else 1
    max_threads = 512 // vec
    dim0 = cols // vec
    dim0_pow2 = _floor_pow2(dim0) if dim0 < max_threads else max_threads
    dim1_pow2 = _floor_pow2(rows) if rows < max_threads else max_threads
    width = min(dim0_pow2, 32)
    height = min(dim1_pow2, max_threads // width)
    width = min(dim0_pow2, max_threads // height)
    if rows < min(height * 16, 256):
        return 0  # each warp takes its own outputs: no split of the rows across blocks
    per_thread = -(-rows // height)
    grid = -(-dim0 // width)
    target = by.sms * (threads_per_sm // (width * height))
    if per_thread < 256 or grid > target:
        return 0
    ctas = max(min(-(-target // grid), -(-per_thread // 16)), -(-per_thread // 256))
    return FP32 * cols * ctas * width * vec if ctas > 1 else 0


def residual_mask(config: ModelConfig, by: ElementBytes) -> int:
    """Bytes per element of the dropout mask on each sub-layer output (none when dropout is 0:
    dropout then returns its input)."""
    return by.mask16 if config.dropout > 0 else 0


def ffn_bytes(config: ModelConfig, tokens: int, by: ElementBytes) -> int:
    """What the feed-forward network saves beyond its input: the activation's output (and its
    input for GELU), plus a mask and the dropped tensor with ``activation_dropout``."""
    per = by.act * (2 if config.activation in ("gelu", "silu") else 1)  # both keep their input
    if config.activation_dropout > 0:
        per += by.mask16 + by.act
    return tokens * config.d_ff * per


def attention_bytes(
    config: ModelConfig, *, batch: int, lq: int, lk: int, causal: bool, by: ElementBytes
) -> int:
    """What scaled dot-product attention saves beyond Q, K, V and its output: the float version of
    the boolean mask and the log-sum-exp per query, or, on the CPU with attention dropout (no fused
    kernel then), the weights themselves."""
    h = config.num_heads
    rows = lq if causal else 1
    if by.spelled_out:
        # bf16/fp16 on a CPU with native bf16: model/attention.py spells attention out (matmul,
        # softmax) rather than call SDPA, so autograd keeps the softmax output and, for the product with V, the
        # masked weights (with attention dropout: the dropout mask and the dropped weights
        # instead), plus two boolean inverted masks
        weights = batch * h * lq * lk * by.act * (3 if config.attention_dropout > 0 else 2)
        return weights + 2 * batch * rows * lk
    if by.cuda:
        lk_mask = lk if lk % 8 == 0 else lk + 8 - lk % 8  # memory-efficient kernel: aligned bias
        lse_len = 32 * math.ceil(lq / 32)
    else:
        lk_mask, lse_len = lk, lq
    if config.attention_dropout > 0 and not by.cuda:
        # math fallback, computed in float32: the weights, their dropout mask and the dropped
        # weights (the boolean mask is added to the scores, not saved; no log-sum-exp); under
        # autocast it saves float32 copies of Q, K and V in place of the 16-bit projections
        upcast = batch * (lq + 2 * lk) * config.d_model * (FP32 - by.act)
        return batch * h * lq * lk * 3 * FP32 + upcast
    return batch * rows * lk_mask * by.act + batch * h * lse_len * FP32


def encoder_layer_bytes(config: ModelConfig, batch: int, length: int, by: ElementBytes) -> int:
    """One encoder layer: its input, Q/K/V, the attention output, two dropout masks, two float32
    residual sums, one more matmul input, the FFN and the LayerNorm statistics.

    Post-LN saves the input as the Q/K/V matmul's input and the first LayerNorm's output as the
    FFN's; pre-LN saves the float32 input for LayerNorm and the two LayerNorm outputs for the
    matmuls, and its second residual sum is the next layer's input: the same bytes either way.
    """
    n, d, a, m = batch * length, config.d_model, by.act, residual_mask(config, by)
    if config.norm_first:
        per_token = FP32 + a + 3 * a + a + m + FP32 + a + m
    else:
        per_token = a + 3 * a + a + m + FP32 + a + m + FP32
    stats = 2 * 2 * FP32  # mean and rstd of two LayerNorms
    return (n * (d * per_token + stats) + ffn_bytes(config, n, by)
            + attention_bytes(config, batch=batch, lq=length, lk=length, causal=False, by=by))


def decoder_layer_bytes(
    config: ModelConfig, batch: int, tgt: int, src: int, by: ElementBytes
) -> int:
    """One decoder layer: masked self-attention, cross-attention and the FFN, counted as the
    encoder's, plus the projected encoder memory (K and V, (B, S, 2D)) that cross-attention saves."""
    n, d, a, m = batch * tgt, config.d_model, by.act, residual_mask(config, by)
    layer_input = FP32 + a if config.norm_first else a  # pre-LN: float32 input + normalised copy
    self_attn = layer_input + 3 * a + a + m + FP32
    cross = a + a + a + m + FP32  # query input, Q, output, mask, residual sum
    ffn = a + m + (0 if config.norm_first else FP32)  # pre-LN: the sum is the next input
    stats = 3 * 2 * FP32
    memory_kv = batch * src * 2 * d * a
    return (n * (d * (self_attn + cross + ffn) + stats) + ffn_bytes(config, n, by) + memory_kv
            + attention_bytes(config, batch=batch, lq=tgt, lk=tgt, causal=True, by=by)
            + attention_bytes(config, batch=batch, lq=tgt, lk=src, causal=False, by=by))


def embedding_bytes(config: ModelConfig, tokens: int, by: ElementBytes) -> int:
    """The embedding's dropout mask (its output is counted as the first layer's input)."""
    return tokens * config.d_model * by.mask32 if config.dropout > 0 else 0

