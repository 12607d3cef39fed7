"""How much memory does one training step take? An estimate, line by line, and a measurement.

The estimate generalises the back-of-the-envelope formula of the seed tutorial (Trenton Bricken's
GPT-2 calculator, 2022):

    total = 4 * parameters + 2 * activations     (values, times 4 bytes in float32)

where "4 * parameters" is the weights, their gradients and Adam's two moments, and "2 *
activations" is the tensors saved for the backward pass plus as much again for their gradients.
:func:`seed_formula_estimate` is that formula for a decoder-only model; with GPT-2 small's
settings it gives the seed's 26.68 GB (the 27.5 GB quoted beside it is Hugging Face's measured
figure).

:func:`estimate_training_memory` applies the same idea to this package's encoder-decoder and
encoder-only models, but counts what PyTorch actually keeps:

* parameters, buffers, the batch and Adam's moments live through the whole step;
* gradients exist only from the backward pass to the optimizer step (the trainer zeroes them with
  ``set_to_none=True``), when most activations are already freed;
* activations are the tensors autograd saves in the forward pass, counted tensor by tensor for each
  sub-layer with its dtype (autocast keeps matmul outputs in 16 bits and LayerNorm, residual sums
  and the loss in 32) and with the dropout masks (a byte per element on CUDA, the activation's
  dtype on the CPU);
* the loss works on (tokens x vocabulary) float32 logits and their gradient.

The peak is then the largest of a few moments: the start of the backward pass (activations and
the loss's gradients), the output projection's backward (activations, the logits' gradient and the
first weight gradient), the last layer's backward (activations and the first gradients in flight),
the end of a classifier's forward pass, and the optimizer step (all gradients and Adam's
temporaries). On the CPU the estimate matches the measured peak to within a few percent for every
configuration tried (``benchmarks/memory.py``); the CUDA-only choices (bool dropout masks, the
memory-efficient attention kernel's aligned bias and padded log-sum-exp, Adam's foreach
temporaries) follow PyTorch's kernels but have not been measured on a GPU here.

:func:`measure_training_peak` runs real steps and reports the peak: ``torch.cuda`` peak allocated
bytes on a GPU, and on the CPU the peak of live tensor storage tracked by :class:`LiveTensorBytes`
(a ``TorchDispatchMode`` that sees every tensor an operator returns, forward and backward, and a
weak reference to each storage that tells when it is freed).

Shapes: B batch, S source length, T target length, D d_model, F d_ff, H heads, V vocabulary,
L layers, P parameters.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from transformer.config import ModelConfig

PRECISIONS = ("fp32", "bf16", "fp16")
DEVICES = ("cuda", "cpu")
POOLINGS = ("mean", "cls")
FP32 = 4
INT64 = 8


# --- results --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryLine:
    """One line of the breakdown: a name, its bytes and how they were counted."""

    name: str
    bytes: int
    detail: str = ""


@dataclass(frozen=True)
class MemoryEstimate:
    """A breakdown and its peak. ``peak_bytes`` is the estimate of the step's peak: the sum of the
    lines named in ``peak_terms`` (those alive at that moment, ``peak_phase``) and of
    ``peak_extra``, the transient tensors of that moment (the other lines are shown for
    completeness)."""

    lines: tuple[MemoryLine, ...]
    peak_bytes: int
    peak_phase: str
    peak_terms: tuple[str, ...]
    parameters: int
    setting: dict[str, Any] = field(default_factory=dict)
    peak_extra: MemoryLine | None = None  # transient bytes at the peak that no line holds

    def line(self, name: str) -> MemoryLine:
        for line in self.lines:
            if line.name == name:
                return line
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "parameters": self.parameters,
            "lines": [{"name": x.name, "bytes": x.bytes, "detail": x.detail} for x in self.lines],
            "peak_bytes": self.peak_bytes,
            "peak_gb": round(self.peak_bytes / 1e9, 4),
            "peak_phase": self.peak_phase,
            "peak_terms": list(self.peak_terms),
            "peak_extra": None if self.peak_extra is None else {
                "name": self.peak_extra.name, "bytes": self.peak_extra.bytes,
                "detail": self.peak_extra.detail},
            "setting": dict(self.setting),
        }


def format_bytes(n: float) -> str:
    """Decimal units, as the seed's "27.5 GB": 1 kB = 1000 bytes."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


# --- the seed's formula ---------------------------------------------------------------------------


def seed_formula_estimate(
    *,
    num_layers: int,
    num_heads: int,
    d_model: int,
    vocab_size: int,
    batch_size: int,
    seq_len: int,
    d_ff: int | None = None,
    bytes_per_value: int = FP32,
) -> MemoryEstimate:
    """The seed's decoder-only (GPT-2) estimate, kept term for term so it reproduces its example.

        parameters  = V*D + L*(4*D^2 + 2*D*F + 4*D)             (F = 4*D in GPT-2)
        activations = B*T*(2*V + L*(6*D + 2*F + H*T))            (14*D + H*T per layer when F = 4*D)
        total       = (parameters + gradients + 2 Adam moments) + (activations + their gradients)

    GPT-2 small (L=12, H=12, D=768, V=50257, B=8, T=1024) gives 26,683,781,120 bytes = 26.68 GB.
    It ignores biases, LayerNorms and position embeddings in the parameters, and counts every
    activation gradient as alive at once; :func:`estimate_training_memory` is the careful version
    for this package's models.
    """
    for name, value in (("num_layers", num_layers), ("num_heads", num_heads), ("d_model", d_model),
                        ("vocab_size", vocab_size), ("batch_size", batch_size), ("seq_len", seq_len),
                        ("bytes_per_value", bytes_per_value)):
        if value < 1:
            raise ValueError(f"{name} must be positive, got {value}")
    f = 4 * d_model if d_ff is None else d_ff
    if f < 1:
        raise ValueError(f"d_ff must be positive, got {d_ff}")
    d, v, n_layers, b, t = d_model, vocab_size, num_layers, batch_size, seq_len
    params = v * d + n_layers * (4 * d * d + 2 * d * f + 4 * d)
    acts = b * t * (2 * v + n_layers * (6 * d + 2 * f + num_heads * t))
    lines = (
        MemoryLine("parameters", params * bytes_per_value, f"{params:,} values"),
        MemoryLine("gradients", params * bytes_per_value, "one per parameter"),
        MemoryLine("optimizer state", 2 * params * bytes_per_value, "Adam: 2 moments per parameter"),
        MemoryLine("activations", acts * bytes_per_value,
                   f"B*T*(2V + L*(6D + 2F + H*T)) = {acts:,} values"),
        MemoryLine("activation gradients", acts * bytes_per_value, "as many as activations"),
    )
    total = sum(x.bytes for x in lines)
    setting = dict(model="decoder-only (seed formula)", num_layers=n_layers, num_heads=num_heads,
                   d_model=d, d_ff=f, vocab_size=v, batch_size=b, seq_len=t,
                   bytes_per_value=bytes_per_value)
    return MemoryEstimate(lines, total, "the seed's formula: every line at once",
                          tuple(x.name for x in lines), params, setting)


# --- parameters -----------------------------------------------------------------------------------


def _layer_parameters(config: ModelConfig) -> tuple[int, int]:
    """Parameters of one encoder layer and of one decoder layer."""
    d, f = config.d_model, config.d_ff
    attention = 4 * d * d + 4 * d  # fused Q/K/V (or Q and fused K/V) and W^O, with biases
    ffn = 2 * d * f + f + d
    return attention + ffn + 2 * 2 * d, 2 * attention + ffn + 3 * 2 * d


def parameter_count(
    config: ModelConfig,
    *,
    encoder_only: bool = False,
    num_labels: int = 2,
    pooling: str = "mean",
) -> int:
    """Distinct parameters of ``Transformer(config)`` or, with ``encoder_only``, of
    ``TransformerClassifier(config, num_labels=, pooling=)``; shared and tied tensors count once."""
    d = config.d_model
    enc_layer, dec_layer = _layer_parameters(config)
    learned = config.max_len * d if config.positional == "learned" else 0
    final_norm = 2 * d if config.norm_first else 0
    encoder = config.num_encoder_layers * enc_layer + final_norm
    if encoder_only:
        if num_labels < 1:
            raise ValueError(f"num_labels must be at least 1, got {num_labels}")
        cls = d if pooling == "cls" else 0
        return config.src_vocab_size * d + learned + cls + encoder + d * num_labels + num_labels
    if config.num_decoder_layers < 1:
        raise ValueError("an encoder-decoder model needs num_decoder_layers >= 1")
    embeddings = config.src_vocab_size * d
    if not config.share_embeddings:
        embeddings += config.tgt_vocab_size * d
    output = config.tgt_vocab_size * (0 if config.tie_embeddings else d) + config.tgt_vocab_size
    decoder = config.num_decoder_layers * dec_layer + final_norm
    return embeddings + 2 * learned + encoder + decoder + output


def _largest_parameter(config: ModelConfig, *, encoder_only: bool, num_labels: int) -> int:
    d = config.d_model
    sizes = [config.src_vocab_size * d, 3 * d * d, d * config.d_ff]
    if encoder_only:
        sizes.append(d * num_labels)
    else:
        sizes.append(config.tgt_vocab_size * d)
    return max(sizes)


def _matmul_weights(config: ModelConfig, *, encoder_only: bool, num_labels: int) -> int:
    """Elements of the Linear weights and biases (autocast casts them to 16 bits)."""
    d, f = config.d_model, config.d_ff
    attention = 4 * d * d + 4 * d
    ffn = 2 * d * f + f + d
    if encoder_only:
        return config.num_encoder_layers * (attention + ffn) + (d + 1) * num_labels
    return (config.num_encoder_layers * (attention + ffn)
            + config.num_decoder_layers * (2 * attention + ffn)
            + (d + 1) * config.tgt_vocab_size)


# --- activations ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Bytes:
    """Bytes per element of each kind of saved tensor for a precision and device."""

    act: int  # matmul and attention outputs (16 bits under autocast)
    mask16: int  # dropout mask of a matmul output
    mask32: int  # dropout mask of a float32 tensor (the embeddings)
    cuda: bool

    @classmethod
    def of(cls, precision: str, device: str) -> _Bytes:
        act = FP32 if precision == "fp32" else 2
        cuda = device == "cuda"
        # CUDA's fused dropout keeps a bool mask; the CPU keeps a mask of the input's dtype.
        return cls(act=act, mask16=1 if cuda else act, mask32=1 if cuda else FP32, cuda=cuda)


def _residual_mask(config: ModelConfig, by: _Bytes) -> int:
    """Bytes per element of the dropout mask on each sub-layer output (none when dropout is 0:
    dropout then returns its input)."""
    return by.mask16 if config.dropout > 0 else 0


def _ffn_bytes(config: ModelConfig, tokens: int, by: _Bytes) -> int:
    """What the feed-forward network saves beyond its input: the activation's output (and its
    input for GELU), plus a mask and the dropped tensor with ``activation_dropout``."""
    per = by.act * (2 if config.activation == "gelu" else 1)
    if config.activation_dropout > 0:
        per += by.mask16 + by.act
    return tokens * config.d_ff * per


def _attention_bytes(
    config: ModelConfig, *, batch: int, lq: int, lk: int, causal: bool, by: _Bytes
) -> int:
    """What scaled dot-product attention saves beyond Q, K, V and its output: the float version of
    the boolean mask and the log-sum-exp per query, or, on the CPU with attention dropout (no fused
    kernel then), the weights themselves."""
    h = config.num_heads
    rows = lq if causal else 1
    if not by.cuda and by.act < FP32:
        # bf16/fp16 on the CPU: model/attention.py spells attention out (matmul, softmax) rather
        # than call SDPA, so autograd keeps the softmax output and, for the product with V, the
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


def _encoder_layer_bytes(config: ModelConfig, batch: int, length: int, by: _Bytes) -> int:
    """One encoder layer: its input, Q/K/V, the attention output, two dropout masks, two float32
    residual sums, one more matmul input, the FFN and the LayerNorm statistics.

    Post-LN saves the input as the Q/K/V matmul's input and the first LayerNorm's output as the
    FFN's; pre-LN saves the float32 input for LayerNorm and the two LayerNorm outputs for the
    matmuls, and its second residual sum is the next layer's input: the same bytes either way.
    """
    n, d, a, m = batch * length, config.d_model, by.act, _residual_mask(config, by)
    if config.norm_first:
        per_token = FP32 + a + 3 * a + a + m + FP32 + a + m
    else:
        per_token = a + 3 * a + a + m + FP32 + a + m + FP32
    stats = 2 * 2 * FP32  # mean and rstd of two LayerNorms
    return (n * (d * per_token + stats) + _ffn_bytes(config, n, by)
            + _attention_bytes(config, batch=batch, lq=length, lk=length, causal=False, by=by))


def _decoder_layer_bytes(config: ModelConfig, batch: int, tgt: int, src: int, by: _Bytes) -> int:
    """One decoder layer: masked self-attention, cross-attention and the FFN, counted as the
    encoder's, plus the projected encoder memory (K and V, (B, S, 2D)) that cross-attention saves."""
    n, d, a, m = batch * tgt, config.d_model, by.act, _residual_mask(config, by)
    layer_input = FP32 + a if config.norm_first else a  # pre-LN: float32 input + normalised copy
    self_attn = layer_input + 3 * a + a + m + FP32
    cross = a + a + a + m + FP32  # query input, Q, output, mask, residual sum
    ffn = a + m + (0 if config.norm_first else FP32)  # pre-LN: the sum is the next input
    stats = 3 * 2 * FP32
    memory_kv = batch * src * 2 * d * a
    return (n * (d * (self_attn + cross + ffn) + stats) + _ffn_bytes(config, n, by) + memory_kv
            + _attention_bytes(config, batch=batch, lq=tgt, lk=tgt, causal=True, by=by)
            + _attention_bytes(config, batch=batch, lq=tgt, lk=src, causal=False, by=by))


def _embedding_bytes(config: ModelConfig, tokens: int, by: _Bytes) -> int:
    """The embedding's dropout mask (its output is counted as the first layer's input)."""
    return tokens * config.d_model * by.mask32 if config.dropout > 0 else 0


def _check_batch(batch_size: int, src_len: int, tgt_len: int, config: ModelConfig,
                 *, encoder_only: bool, pooling: str) -> None:
    for name, value in (("batch_size", batch_size), ("src_len", src_len), ("tgt_len", tgt_len)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    longest = config.max_len - (1 if encoder_only and pooling == "cls" else 0)
    if src_len > longest:
        raise ValueError(f"src_len={src_len} exceeds the model's max_len={longest}")
    if not encoder_only and tgt_len > config.max_len:
        raise ValueError(f"tgt_len={tgt_len} exceeds the model's max_len={config.max_len}")


@dataclass(frozen=True)
class _Stacks:
    """What the model's stacks and head save, for one of the two model kinds."""

    lines: tuple[MemoryLine, ...]  # the activation lines
    batch: int  # bytes of the batch tensors
    loss: int  # loss tensors at the start of the backward pass
    loss_text: str
    head_params: int  # weights of the output projection or the classifier head
    last_tokens: int  # tokens through the last layer (decoder or encoder)
    last_moment: tuple[str, int, str]  # the model-specific moment: name, transient bytes, what


def _translation_stacks(config: ModelConfig, b: int, s: int, t: int, by: _Bytes) -> _Stacks:
    d, a = config.d_model, by.act
    n_src, n_tgt, v = b * s, b * t, config.tgt_vocab_size
    final_norm = config.norm_first
    encoder = (_embedding_bytes(config, n_src, by)
               + (n_src * (d * FP32 + 2 * FP32) if final_norm else 0)
               + config.num_encoder_layers * _encoder_layer_bytes(config, b, s, by))
    # float32 memory is saved once by the first cross-attention; autocast casts it per layer
    memory_in = n_src * d * (FP32 if a == FP32 else a * config.num_decoder_layers)
    output_in = n_tgt * d * a + (n_tgt * (d * FP32 + 2 * FP32) if final_norm else 0)
    decoder = (_embedding_bytes(config, n_tgt, by) + memory_in + output_in
               + config.num_decoder_layers * _decoder_layer_bytes(config, b, t, s, by))
    # transformer.training.loss saves the float32 logits (B*T, V) for its hand-written backward,
    # which builds the gradient in one more (B*T, V) float32 tensor; label smoothing adds none.
    # Under autocast the model's 16-bit logits stay alive beside their float32 copy.
    grad16 = a if a != FP32 else 0
    grads = "and their gradient" + (" (and the 16-bit logits)" if grad16 else "")
    # the output projection's backward: the logits' gradient, the weight gradient (under autocast
    # first in 16 bits, then float32) and the gradient of its input
    out_proj = n_tgt * v * a + v * d * (FP32 + grad16) + n_tgt * d * a
    return _Stacks(
        lines=(
            MemoryLine("activations: encoder", encoder,
                       f"{config.num_encoder_layers} layers over {b} x {s} source tokens"),
            MemoryLine("activations: decoder", decoder,
                       f"{config.num_decoder_layers} layers over {b} x {t} target tokens"),
        ),
        batch=(n_src + 2 * n_tgt) * INT64,
        loss=n_tgt * v * (2 * FP32 + grad16),
        loss_text=f"logits {grads}: {b} x {t} x {v}, float32",
        head_params=v * d + v,
        last_tokens=n_tgt,
        last_moment=("output projection's backward", out_proj,
                     "the logits' gradient and the output projection's weight gradient"),
    )


def _classifier_stacks(config: ModelConfig, b: int, s: int, by: _Bytes, num_labels: int,
                       pooling: str) -> _Stacks:
    d, a = config.d_model, by.act
    tokens = s + (1 if pooling == "cls" else 0)  # the CLS vector takes a position
    n = b * tokens
    encoder = (_embedding_bytes(config, n, by)
               + (n * (d * FP32 + 2 * FP32) if config.norm_first else 0)
               + config.num_encoder_layers * _encoder_layer_bytes(config, b, tokens, by))
    # mean pooling saves the (B, S, 1) float mask it multiplies and divides by; the dropout before
    # the linear head keeps its mask and output, (B, D)
    head = (n * FP32 if pooling == "mean" else 0) + b * d * (
        (by.mask32 + a) if config.dropout > 0 else a)
    # The end of the forward pass: the last layer's locals still hold its input, the attention
    # output and (post-LN, autocast) the first LayerNorm's output, beside the final output
    held = a + FP32 + (0 if config.norm_first or a == FP32 else 2 * FP32)
    return _Stacks(
        lines=(
            MemoryLine("activations: encoder", encoder,
                       f"{config.num_encoder_layers} layers over {b} x {tokens} tokens"),
            MemoryLine("activations: head", head, f"{pooling} pooling and the linear head"),
        ),
        batch=(n + b) * INT64,
        loss=3 * b * num_labels * FP32,
        loss_text=f"log-probabilities and 2 gradients: {b} x {num_labels}, float32",
        head_params=d * num_labels + num_labels,
        last_tokens=n,
        last_moment=("end of the forward pass", n * d * held,
                     "the last layer's inputs and outputs held by local variables"),
    )


def estimate_training_memory(
    config: ModelConfig,
    *,
    batch_size: int,
    src_len: int,
    tgt_len: int | None = None,
    precision: str = "fp32",
    device: str = "cuda",
    encoder_only: bool = False,
    num_labels: int = 2,
    pooling: str = "mean",
    label_smoothing: float = 0.1,
) -> MemoryEstimate:
    """Estimate the peak memory of one training step with Adam (see the module docstring).

    The batch is ``batch_size`` rows of ``src_len`` source tokens and ``tgt_len`` target tokens
    (default: ``src_len``; BOS included), without padding. ``precision`` is ``fp32``, ``bf16``
    (autocast) or ``fp16`` (autocast with a grad scaler: the same bytes); the weights, gradients
    and Adam moments stay float32 in all three. ``device`` (``cuda`` or ``cpu``) changes the
    dropout masks' size, the attention kernel and Adam's temporaries. ``encoder_only`` estimates
    a ``TransformerClassifier`` with ``num_labels`` and ``pooling`` (loss over (B, num_labels)
    logits). The translation loss is :func:`transformer.training.loss.label_smoothed_cross_entropy`;
    ``label_smoothing`` does not change the estimate: the loss keeps the same two tensors either way.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    tgt_len = src_len if tgt_len is None else tgt_len
    _check_batch(batch_size, src_len, tgt_len, config, encoder_only=encoder_only, pooling=pooling)
    by = _Bytes.of(precision, device)
    a, d, b = by.act, config.d_model, batch_size
    params = parameter_count(config, encoder_only=encoder_only, num_labels=num_labels,
                             pooling=pooling)
    tables = 0 if config.positional == "learned" else (1 if encoder_only else 2)
    if encoder_only:
        stacks = _classifier_stacks(config, b, src_len, by, num_labels, pooling)
    else:
        stacks = _translation_stacks(config, b, src_len, tgt_len, by)

    # The last layer's FFN backward: the head's weight gradient, then the second matmul's, and two
    # (tokens, F) gradients in flight plus the residual gradient, while the layer's LayerNorm
    # input and dropout mask are already freed.
    grad16 = a if a != FP32 else 0  # autocast: a 16-bit weight gradient before its float32 copy
    n = stacks.last_tokens
    last_layer = ((stacks.head_params + d * config.d_ff + d) * (FP32 + grad16)
                  + 2 * n * config.d_ff * a + n * d * (a - FP32 - _residual_mask(config, by)))
    casts = 0 if a == FP32 else a * _matmul_weights(config, encoder_only=encoder_only,
                                                     num_labels=num_labels)
    # Adam's update: a foreach sqrt over all moments on CUDA; on the CPU one parameter at a time,
    # two temporaries of its size while the previous parameter's denominator is still alive
    largest = _largest_parameter(config, encoder_only=encoder_only, num_labels=num_labels)
    adjacent = 0
    if not encoder_only and not config.share_embeddings:
        adjacent = (config.src_vocab_size + 2 * config.tgt_vocab_size) * d
    step_temp = params * FP32 if by.cuda else max(2 * largest, adjacent) * FP32

    lines = [
        MemoryLine("parameters", params * FP32, f"{params:,} float32 values"),
        MemoryLine("buffers", tables * config.max_len * d * FP32,
                   "sinusoidal position tables" if tables else "none"),
        MemoryLine("batch", stacks.batch, "token ids (int64)"),
        MemoryLine("optimizer state", 2 * params * FP32, "Adam: exp_avg and exp_avg_sq, float32"),
        MemoryLine("gradients", params * FP32, "float32, one per parameter"),
        *stacks.lines,
        MemoryLine("loss", stacks.loss, stacks.loss_text),
    ]
    if casts:
        lines.append(MemoryLine("autocast weight copies", casts,
                                "16-bit copies of Linear weights and biases"))
    lines.append(MemoryLine("optimizer temporaries", step_temp,
                            "foreach sqrt of exp_avg_sq" if by.cuda
                            else "per-parameter sqrt and division"))

    always = ["parameters", "buffers", "batch", "optimizer state"]
    acts = [x.name for x in stacks.lines] + (["autocast weight copies"] if casts else [])
    # (moment, lines alive, transient bytes no line holds, what they are)
    moment, extra, extra_text = stacks.last_moment
    phases: list[tuple[str, list[str], int, str]] = [
        ("start of the backward pass", acts + ["loss"], 0, ""),
        (moment, acts, extra, extra_text),
        ("last layer's backward", acts, last_layer,
         "gradients in flight: head and last FFN weights, two (tokens, d_ff) tensors"),
        ("optimizer step", ["gradients", "optimizer temporaries"], 0, ""),
    ]
    sizes = {x.name: x.bytes for x in lines}

    def total(phase: tuple[str, list[str], int, str]) -> int:
        return sum(sizes[name] for name in always + phase[1]) + phase[2]

    peak = max(phases, key=total)
    setting = dict(model="encoder-only" if encoder_only else "encoder-decoder",
                   precision=precision, device=device, batch_size=b, src_len=src_len,
                   tgt_len=None if encoder_only else tgt_len, config=config.to_dict())
    if encoder_only:
        setting.update(num_labels=num_labels, pooling=pooling)
    extra_line = MemoryLine("transient", peak[2], peak[3]) if peak[2] else None
    return MemoryEstimate(tuple(lines), total(peak), peak[0], tuple(always + peak[1]), params,
                          setting, extra_line)


# --- measurement ----------------------------------------------------------------------------------


class LiveTensorBytes(TorchDispatchMode):
    """Tracks the bytes of live tensor storage while active, and their peak.

    Every tensor an operator returns (forward, backward and optimizer alike) has its storage
    counted once, until a weak reference reports the storage freed; storages that exist before
    (weights, optimizer state, the batch) are added with :meth:`track`. Views share their base's
    storage and count nothing. Scratch memory inside a single kernel is not seen, so on the CPU this
    is the peak of tensors, the counterpart of ``torch.cuda.max_memory_allocated``.
    ``phase`` names the part of the step under way; ``phase_peaks`` keeps each part's peak.
    """

    def __init__(self) -> None:
        super().__init__()
        self.current = 0
        self.peak = 0
        self.phase = "setup"
        self.phase_peaks: dict[str, int] = {}
        self._sizes: dict[int, int] = {}
        self._refs: dict[int, weakref.ref] = {}

    def track(self, tensor: Any) -> None:
        """Count ``tensor``'s storage (once) until it is freed; non-tensors are ignored."""
        if not isinstance(tensor, torch.Tensor) or tensor.device.type == "meta":
            return
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse or other storage-less tensors
            return
        key = storage._cdata
        if key in self._sizes:
            return
        size = storage.nbytes()
        self._sizes[key] = size
        self._refs[key] = weakref.ref(storage, lambda _ref, key=key: self._free(key))
        self.current += size
        self.peak = max(self.peak, self.current)
        self.phase_peaks[self.phase] = max(self.phase_peaks.get(self.phase, 0), self.current)

    def _free(self, key: int) -> None:
        self.current -= self._sizes.pop(key, 0)
        self._refs.pop(key, None)

    def set_phase(self, name: str) -> None:
        self.phase = name
        self.phase_peaks[name] = max(self.phase_peaks.get(name, 0), self.current)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for item in tree_flatten(out)[0]:
            self.track(item)
        return out


@dataclass(frozen=True)
class MeasuredPeak:
    """The peak bytes of a measured training step, overall and per phase."""

    peak_bytes: int
    phase_peaks: dict[str, int]
    device: str
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {"peak_bytes": self.peak_bytes, "phase_peaks": dict(self.phase_peaks),
                "device": self.device, "method": self.method}


class _Phases:
    """Marks forward / backward / optimizer phases on the CPU tracker or the CUDA allocator."""

    def __init__(self, device: torch.device, tracker: LiveTensorBytes | None) -> None:
        self.device, self.tracker = device, tracker
        self.peaks: dict[str, int] = {}
        self._name: str | None = None

    def mark(self, name: str | None) -> None:
        if self.tracker is not None:
            if name is not None:
                self.tracker.set_phase(name)
            return
        torch.cuda.synchronize(self.device)
        if self._name is not None:
            self.peaks[self._name] = torch.cuda.max_memory_allocated(self.device)
        if name is not None:
            torch.cuda.reset_peak_memory_stats(self.device)
        self._name = name


def measure_training_peak(
    config: ModelConfig,
    *,
    batch_size: int,
    src_len: int,
    tgt_len: int | None = None,
    precision: str = "fp32",
    device: str = "cpu",
    encoder_only: bool = False,
    num_labels: int = 2,
    pooling: str = "mean",
    label_smoothing: float = 0.1,
    seed: int = 0,
) -> MeasuredPeak:
    """Build the model, run two training steps on a random batch and report the second's peak.

    A step is what the trainer does: forward and loss under autocast (``bf16``/``fp16``),
    backward (through a grad scaler for ``fp16``), gradient clipping, an Adam step with the
    paper's betas and ``zero_grad(set_to_none=True)``. The loss is the label-smoothed
    cross-entropy for translation and plain cross-entropy for a classifier. The first step creates
    Adam's moments, so the second is the steady state. On CUDA the peak is
    ``torch.cuda.max_memory_allocated``; on the CPU it is :class:`LiveTensorBytes`'s.
    """
    import torch.nn.functional as F

    from transformer.model import Transformer, TransformerClassifier
    from transformer.training.loss import label_smoothed_cross_entropy

    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    dev = torch.device(device)
    if dev.type not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but CUDA is not available")
    if precision == "fp16" and dev.type != "cuda":
        raise ValueError("precision 'fp16' needs a CUDA device; use 'bf16' on the CPU")
    tgt_len = src_len if tgt_len is None else tgt_len
    _check_batch(batch_size, src_len, tgt_len, config, encoder_only=encoder_only, pooling=pooling)

    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        torch.manual_seed(seed)
        if encoder_only:
            model: torch.nn.Module = TransformerClassifier(config, num_labels=num_labels,
                                                           pooling=pooling)
        else:
            model = Transformer(config)
    model.to(dev).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    low = 4  # ids above the special ones, so no position is padding
    src = torch.randint(low, config.src_vocab_size, (batch_size, src_len), generator=generator)
    if encoder_only:
        labels = torch.randint(0, num_labels, (batch_size,), generator=generator)
        batch = [src.to(dev), labels.to(dev)]
    else:
        tgt = torch.randint(low, config.tgt_vocab_size, (batch_size, tgt_len + 1),
                            generator=generator)
        batch = [src.to(dev), tgt[:, :-1].contiguous().to(dev), tgt[:, 1:].contiguous().to(dev)]

    def autocast() -> contextlib.AbstractContextManager:
        if precision == "fp32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        return torch.autocast(device_type=dev.type, dtype=dtype)

    def step(phases: _Phases | None) -> None:
        mark = phases.mark if phases is not None else (lambda _name: None)
        mark("forward")
        with autocast():
            if encoder_only:
                loss = F.cross_entropy(model(batch[0]), batch[1], reduction="sum")
            else:
                loss = label_smoothed_cross_entropy(
                    model(batch[0], batch[1]), batch[2], smoothing=label_smoothing,
                    ignore_index=config.pad_id)
        mark("backward")
        (scaler.scale(loss) if scaler is not None else loss).backward()
        del loss
        mark("optimizer")
        if scaler is not None:
            scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        mark(None)

    step(None)  # creates Adam's moments
    if dev.type == "cuda":
        phases = _Phases(dev, None)
        step(phases)
        peak = max(phases.peaks.values())
        return MeasuredPeak(peak, phases.peaks, "cuda", "torch.cuda.max_memory_allocated")
    tracker = LiveTensorBytes()
    for tensor in [*model.parameters(), *model.buffers(), *batch]:
        tracker.track(tensor)
    for state in optimizer.state.values():
        for value in state.values():
            tracker.track(value)
    with tracker:
        phases = _Phases(dev, tracker)
        step(phases)
    peaks = {k: v for k, v in tracker.phase_peaks.items() if k != "setup"}
    return MeasuredPeak(tracker.peak, peaks, "cpu", "live tensor storage (TorchDispatchMode)")


# --- report ---------------------------------------------------------------------------------------


def batch_for_tokens(max_tokens: int, *, src_len: int, tgt_len: int | None,
                     encoder_only: bool = False) -> int:
    """Rows of a batch that spends ``max_tokens`` padded positions as
    :class:`~transformer.data.batching.TokenBatchSampler` counts them: ``rows * width`` with
    ``width = max(src_len + 1, tgt_len)`` (``tgt_len`` includes BOS), or ``src_len`` alone for an
    encoder-only model."""
    width = src_len if encoder_only else max(src_len + 1, src_len if tgt_len is None else tgt_len)
    if max_tokens < width:
        raise ValueError(f"max_tokens={max_tokens} is smaller than one row of {width} tokens")
    return max_tokens // width


def format_report(estimate: MemoryEstimate, measured: MeasuredPeak | None = None) -> str:
    """The breakdown as text: one line per term, the peak and, when given, the measured peak."""
    s = estimate.setting
    out = []
    if s.get("model", "").startswith("decoder-only"):
        out.append(f"training memory, {s['model']}: {s['num_layers']} layers, d_model={s['d_model']}, "
                   f"{s['num_heads']} heads, d_ff={s['d_ff']}, vocabulary {s['vocab_size']}")
        out.append(f"batch {s['batch_size']} x {s['seq_len']} tokens, "
                   f"{s['bytes_per_value']} bytes per value, Adam")
    else:
        c = s["config"]
        layers = (f"{c['num_encoder_layers']} encoder layers" if s["model"] == "encoder-only"
                  else f"{c['num_encoder_layers']}+{c['num_decoder_layers']} layers")
        vocab = (f"vocabulary {c['src_vocab_size']}, {s['num_labels']} labels"
                 if s["model"] == "encoder-only"
                 else f"vocabulary {c['src_vocab_size']}/{c['tgt_vocab_size']}")
        out.append(f"training memory, {s['model']}: d_model={c['d_model']}, {c['num_heads']} heads, "
                   f"{layers}, d_ff={c['d_ff']}, {vocab}")
        lengths = (f"{s['src_len']} tokens" if s["tgt_len"] is None
                   else f"{s['src_len']} source and {s['tgt_len']} target tokens")
        out.append(f"batch {s['batch_size']} x {lengths}, {s['precision']}, {s['device']}, Adam")
    width = max(len(x.name) for x in estimate.lines)
    out.append("")
    for x in estimate.lines:
        mark = "*" if x.name in estimate.peak_terms else " "
        out.append(f" {mark} {x.name:<{width}}  {format_bytes(x.bytes):>10}  {x.detail}")
    out.append("")
    where = f"{estimate.peak_phase}: the lines marked *"
    if estimate.peak_extra is not None:
        where += f" + {format_bytes(estimate.peak_extra.bytes)} of {estimate.peak_extra.detail}"
    out.append(f"   {'peak (estimate)':<{width}}  {format_bytes(estimate.peak_bytes):>10}  {where}")
    if measured is not None:
        ratio = estimate.peak_bytes / max(measured.peak_bytes, 1)
        out.append(f"   {'peak (measured)':<{width}}  {format_bytes(measured.peak_bytes):>10}  "
                   f"{measured.method} on {measured.device}; estimate/measured = {ratio:.3f}")
    return "\n".join(out)
