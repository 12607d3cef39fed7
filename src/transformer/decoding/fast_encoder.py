"""The encoder pass of the decoding fast path: the model's encoder with its products chosen by rows.

Shapes: B sentences, S source length, D d_model, H heads, Dh head dimension.

A search encodes its sources once, B x S rows through every encoder layer. ``model.encode`` calls
each ``nn.Linear``, which multiplies through MKL; on a CPU in float32 oneDNN's product with weights
packed once is 2-2.5x faster at these row counts (a batch of 16 sentences of 24 tokens, d_model
256: 19 ms an encoding through the modules). :func:`fast_encode` computes what ``model.encode``
computes (the same embeddings, attention and layer norms, in the same order) with each linear layer
replaced by :func:`transformer.decoding.packing.step_linear`'s choice for its rows. Equal to
``model.encode`` up to float32 rounding (tests/decoding/test_fast_encoder.py). int8 decoding keeps
the encoder in float32: the encoder runs once a search, the decoder once a token.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

from transformer.decoding.packing import step_linear as _step_linear
from transformer.decoding.thresholds import DecodingThresholds
from transformer.model import Transformer
from transformer.model.attention import attention
from transformer.model.encoder import EncoderLayer
from transformer.model.masks import padding_mask

TensorFn = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class EncoderLayerStep:
    """What one encoder layer calls: its linear layers (packed or not), norms and activation."""

    heads: int  # H
    norm_first: bool
    qkv: TensorFn
    out: TensorFn
    ff1: TensorFn
    ff2: TensorFn
    activation: TensorFn
    norm1: TensorFn
    norm2: TensorFn


def encoder_layer_step(layer: EncoderLayer, *, pack: bool,
                       thresholds: DecodingThresholds | None = None) -> EncoderLayerStep:
    """``layer``'s step functions, its linear layers packed for oneDNN when ``pack`` (from the
    rows where ``thresholds``' crossovers say it pays; None: this machine's)."""
    attn, ff = layer.self_attn, layer.feed_forward
    step_linear = functools.partial(_step_linear, thresholds=thresholds)
    return EncoderLayerStep(
        heads=attn.num_heads,
        norm_first=layer.norm_first,
        qkv=step_linear(attn.qkv_proj, pack=pack),
        out=step_linear(attn.out_proj, pack=pack),
        ff1=step_linear(ff.linear1, pack=pack),
        ff2=step_linear(ff.linear2, pack=pack),
        activation=ff.activation,
        norm1=layer.norm1,
        norm2=layer.norm2,
    )


def fast_encode(model: Transformer, layers: list[EncoderLayerStep], src: Tensor) -> Tensor:
    """``model.encode(src)``: source ids (B, S) -> memory (B, S, D), in evaluation mode."""
    mask = padding_mask(src, model.config.pad_id)  # (B, 1, 1, S)
    mask = None if bool(mask.all()) else mask  # SDPA is faster without one
    x = model.src_embed(src)  # (B, S, D)
    b, s, d = x.shape
    x = x.reshape(b * s, d)  # (B * S, D): the products see rows
    for step in layers:
        if step.norm_first:
            x = x + _self_attention(step, step.norm1(x), mask, b)
            x = x + _feed_forward(step, step.norm2(x))
        else:
            x = step.norm1(x + _self_attention(step, x, mask, b))
            x = step.norm2(x + _feed_forward(step, x))
    return model.encoder.norm(x.view(b, s, d))


def _self_attention(step: EncoderLayerStep, x: Tensor, mask: Tensor | None, b: int) -> Tensor:
    rows, d = x.shape
    s, h = rows // b, step.heads
    qkv = step.qkv(x).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4)  # (3, B, H, S, Dh)
    q, k, v = qkv.unbind(0)
    out, _ = attention(q, k, v, mask)  # (B, H, S, Dh)
    return step.out(out.transpose(1, 2).reshape(rows, d))  # heads concatenated: (B * S, D)


def _feed_forward(step: EncoderLayerStep, x: Tensor) -> Tensor:
    return step.ff2(step.activation(step.ff1(x)))


def encoder_steps(model: Transformer, *, pack: bool,
                  thresholds: DecodingThresholds | None = None) -> list[EncoderLayerStep]:
    """Every encoder layer's :class:`EncoderLayerStep`; ``pack`` and ``thresholds`` as for
    :func:`~transformer.decoding.packing.step_linear` (the
    :class:`~transformer.decoding.fast_decoder.FastDecoder` packs when ``packing.can_pack``)."""
    return [encoder_layer_step(layer, pack=pack, thresholds=thresholds) for layer in model.encoder.layers]
