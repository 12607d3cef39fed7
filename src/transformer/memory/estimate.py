"""The estimate of one training step's peak memory, line by line.

It generalises the seed tutorial's GPT-2 formula (:mod:`transformer.memory.gpt2_formula`) to this
package's encoder-decoder and encoder-only models, but counts what PyTorch actually keeps:

* parameters, buffers, the batch and Adam's moments live through the whole step;
* gradients exist only from the backward pass to the optimizer step (the trainer zeroes them with
  ``set_to_none=True``), when most activations are already freed;
* activations are the tensors autograd saves in the forward pass, counted tensor by tensor for each
  sub-layer with its dtype and with the dropout masks (:mod:`transformer.memory.activations`);
* the loss works on (tokens x vocabulary) float32 logits and their gradient.

The peak is then the largest of a few moments: the start of the backward pass (activations and
the loss's gradients), the output projection's backward (activations, the logits' gradient and the
first weight gradient), the last layer's backward (activations and the first gradients in flight),
the end of a classifier's forward pass, and the optimizer step (all gradients and Adam's
temporaries). On the CPU the estimate matches the measured peak to within a few percent for every
configuration tried (``benchmarks/memory.py``). The CUDA-only choices (bool dropout masks, the
memory-efficient attention kernel's aligned bias and padded log-sum-exp, Adam's foreach
temporaries, the sum kernel's staging buffer for bias gradients) follow PyTorch's kernels; on an
H200 the estimate was 0.98-1.03x ``torch.cuda.max_memory_allocated`` for the GPU check's eight
steps (base translation fp32/bf16/fp16, a small classifier; ``benchmarks/results/gpu_check.json``).

Shapes: B batch, S source length, T target length, D d_model, F d_ff, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from transformer.config import ModelConfig
from transformer.memory.activations import (
    ElementBytes,
    decoder_layer_bytes,
    embedding_bytes,
    encoder_layer_bytes,
    residual_mask,
    sum_staging_bytes,
)
from transformer.memory.parameters import largest_parameter, matmul_weights, parameter_count
from transformer.memory.setting import FP32, INT64, TrainingStep


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


def _translation_stacks(config: ModelConfig, b: int, s: int, t: int, by: ElementBytes) -> _Stacks:
    d, a = config.d_model, by.act
    n_src, n_tgt, v = b * s, b * t, config.tgt_vocab_size
    final_norm = config.norm_first
    encoder = (embedding_bytes(config, n_src, by)
               + (n_src * (d * FP32 + 2 * FP32) if final_norm else 0)
               + config.num_encoder_layers * encoder_layer_bytes(config, b, s, by))
    # float32 memory is saved once by the first cross-attention; autocast casts it per layer
    memory_in = n_src * d * (FP32 if a == FP32 else a * config.num_decoder_layers)
    output_in = n_tgt * d * a + (n_tgt * (d * FP32 + 2 * FP32) if final_norm else 0)
    decoder = (embedding_bytes(config, n_tgt, by) + memory_in + output_in
               + config.num_decoder_layers * decoder_layer_bytes(config, b, t, s, by))
    # transformer.training.loss saves the float32 logits (B*T, V) for its hand-written backward,
    # which builds the gradient in one more (B*T, V) float32 tensor; label smoothing adds none.
    # Under autocast the model's 16-bit logits stay alive beside their float32 copy.
    grad16 = a if a != FP32 else 0
    grads = "and their gradient" + (" (and the 16-bit logits)" if grad16 else "")
    # the output projection's backward: the logits' gradient, the weight gradient (under autocast
    # first in 16 bits, then float32) and the gradient of its input; on CUDA, the staging buffer of
    # its bias gradient's sum over the tokens (activations.sum_staging_bytes)
    out_proj = (n_tgt * v * a + v * d * (FP32 + grad16) + n_tgt * d * a
                + sum_staging_bytes(n_tgt, v, by))
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


def _classifier_stacks(config: ModelConfig, b: int, s: int, by: ElementBytes, num_labels: int,
                       pooling: str) -> _Stacks:
    d, a = config.d_model, by.act
    tokens = s + (1 if pooling == "cls" else 0)  # the CLS vector takes a position
    n = b * tokens
    encoder = (embedding_bytes(config, n, by)
               + (n * (d * FP32 + 2 * FP32) if config.norm_first else 0)
               + config.num_encoder_layers * encoder_layer_bytes(config, b, tokens, by))
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


class _Moment(NamedTuple):
    """A moment of the step that may hold the peak: the lines alive then, and the transient
    tensors no line holds (``extra`` bytes, ``what`` they are)."""

    name: str
    alive: list[str]
    extra: int
    what: str


# the lines alive through the whole step, whatever the moment
_ALWAYS = ["parameters", "buffers", "batch", "optimizer state"]


def estimate_training_memory(config: ModelConfig, step: TrainingStep, *,
                             device: str = "cuda") -> MemoryEstimate:
    """Estimate the peak memory of one training ``step`` with Adam (see the module docstring).

    The weights, gradients and Adam moments stay float32 in every precision of the step (``fp16``
    costs what ``bf16`` does). ``device`` (``cuda`` or ``cpu``) changes the dropout masks' size,
    the attention kernel and Adam's temporaries. An ``encoder_only`` step's loss is over
    (B, num_labels) logits. The translation loss is
    :func:`transformer.training.loss.label_smoothed_cross_entropy`; ``label_smoothing`` does not
    change the estimate: the loss keeps the same two tensors either way.
    """
    tgt_len = step.check(config, device=device)
    batch_size, src_len, precision = step.batch_size, step.src_len, step.precision
    encoder_only, num_labels, pooling = step.encoder_only, step.num_labels, step.pooling
    by = ElementBytes.of(precision, device)
    params = parameter_count(config, encoder_only=encoder_only, num_labels=num_labels,
                             pooling=pooling)
    if encoder_only:
        stacks = _classifier_stacks(config, batch_size, src_len, by, num_labels, pooling)
    else:
        stacks = _translation_stacks(config, batch_size, src_len, tgt_len, by)
    lines = _breakdown(config, stacks, by, params=params, encoder_only=encoder_only,
                       num_labels=num_labels)
    sizes = {x.name: x.bytes for x in lines}

    def total(moment: _Moment) -> int:
        return sum(sizes[name] for name in _ALWAYS + moment.alive) + moment.extra

    peak = max(_moments(config, stacks, by, casts="autocast weight copies" in sizes), key=total)
    setting = dict(model="encoder-only" if encoder_only else "encoder-decoder",
                   precision=precision, device=device, batch_size=batch_size, src_len=src_len,
                   tgt_len=None if encoder_only else tgt_len, config=config.to_dict())
    if encoder_only:
        setting.update(num_labels=num_labels, pooling=pooling)
    extra_line = MemoryLine("transient", peak.extra, peak.what) if peak.extra else None
    return MemoryEstimate(tuple(lines), total(peak), peak.name, tuple(_ALWAYS + peak.alive),
                          params, setting, extra_line)


def _breakdown(config: ModelConfig, stacks: _Stacks, by: ElementBytes, *, params: int,
               encoder_only: bool, num_labels: int) -> list[MemoryLine]:
    """The estimate's lines: what lives through the step (weights, buffers, batch, Adam's
    moments), the gradients, the activations and the loss, and under autocast the 16-bit weight
    copies, then the optimizer step's temporaries."""
    d = config.d_model
    tables = 0 if config.positional == "learned" else (1 if encoder_only else 2)
    casts = 0 if by.act == FP32 else by.act * matmul_weights(config, encoder_only=encoder_only,
                                                             num_labels=num_labels)
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
    step_temp = _optimizer_temporaries(config, by, params=params, encoder_only=encoder_only,
                                       num_labels=num_labels)
    lines.append(MemoryLine("optimizer temporaries", step_temp,
                            "foreach sqrt of exp_avg_sq" if by.cuda
                            else "per-parameter sqrt and division"))
    return lines


def _optimizer_temporaries(config: ModelConfig, by: ElementBytes, *, params: int,
                           encoder_only: bool, num_labels: int) -> int:
    """Bytes of Adam's update temporaries: a foreach sqrt over all moments on CUDA; on the CPU one
    parameter at a time, two temporaries of its size while the previous parameter's denominator
    is still alive."""
    largest = largest_parameter(config, encoder_only=encoder_only, num_labels=num_labels)
    adjacent = 0
    if not encoder_only and not config.share_embeddings:
        adjacent = (config.src_vocab_size + 2 * config.tgt_vocab_size) * config.d_model
    return params * FP32 if by.cuda else max(2 * largest, adjacent) * FP32


def _last_layer_backward(config: ModelConfig, stacks: _Stacks, by: ElementBytes) -> int:
    """Transient bytes of the last layer's FFN backward: the head's weight gradient, then the
    second matmul's, and two (tokens, F) gradients in flight plus the residual gradient, while
    the layer's LayerNorm input and dropout mask are already freed."""
    a, d = by.act, config.d_model
    grad16 = a if a != FP32 else 0  # autocast: a 16-bit weight gradient before its float32 copy
    n = stacks.last_tokens
    in_flight = 2 * n * config.d_ff * a
    # on CUDA, summing the first FFN linear's bias gradient over the tokens stages partial sums
    # (activations.sum_staging_bytes) while one (tokens, d_ff) gradient is alive
    in_flight = max(in_flight, n * config.d_ff * a + sum_staging_bytes(n, config.d_ff, by))
    return ((stacks.head_params + d * config.d_ff + d) * (FP32 + grad16)
            + in_flight + n * d * (a - FP32 - residual_mask(config, by)))


def _moments(config: ModelConfig, stacks: _Stacks, by: ElementBytes, *,
             casts: bool) -> list[_Moment]:
    """The moments that may hold the peak, in the step's order (``casts``: autocast's weight
    copies are alive with the activations)."""
    acts = [x.name for x in stacks.lines] + (["autocast weight copies"] if casts else [])
    moment, extra, what = stacks.last_moment
    return [
        _Moment("start of the backward pass", acts + ["loss"], 0, ""),
        _Moment(moment, acts, extra, what),
        _Moment("last layer's backward", acts, _last_layer_backward(config, stacks, by),
                "gradients in flight: head and last FFN weights, two (tokens, d_ff) tensors"),
        _Moment("optimizer step", ["gradients", "optimizer temporaries"], 0, ""),
    ]
