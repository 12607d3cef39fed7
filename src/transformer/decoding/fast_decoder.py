"""The decoding fast path: one cached decoder step of a :class:`~transformer.model.Transformer`,
spelled out for speed.

Shapes: N sentences, G rows (beams) per sentence, R = N * G rows being decoded, S source length,
D d_model, H heads, Dh head dimension, V target vocabulary.

The model's own ``decode(..., cache=...)`` is the reference: every row has its own memory row, and
every step goes through the modules. A :class:`FastDecoder` computes the same step (the model's
weights, layer norms, embeddings and activations, the same equations), arranged for decoding:

- the linear layers of each step are called directly, each call taking the product that is
  fastest for its number of rows (plain, weights packed once for oneDNN on a CPU, or int8:
  :mod:`transformer.decoding.packing`), the packed weights held by the decoder object and made
  again only when a weight has changed;
- the sources are encoded with the encoder's products chosen the same way
  (:mod:`transformer.decoding.fast_encoder`);
- a batch whose sources have no padding attends to the memory without a mask;
- the G beams of a sentence share its one row of memory keys/values, which are projected once
  (:func:`~transformer.decoding.kernels.fold_groups`); for a few sentences the cross-attention's
  query and output projections are folded into them as well
  (:mod:`transformer.decoding.folded_cross`);
- self-attention caches of few rows append a step's keys and values with one copy
  (:mod:`transformer.decoding.step_cache`); beam search over many rows moves slot numbers instead
  of keys (:mod:`transformer.decoding.slot_cache`);
- one query against many keys takes the faster CPU kernel (:mod:`transformer.decoding.kernels`);
- with ``precision="int8"`` the step's linear layers and the output projection multiply by int8
  weights quantized once (:func:`~transformer.decoding.packing.int8_linear_weight`), close to
  float32, not equal.

Build one decoder per model and pass it to ``greedy_decode``/``beam_search`` (``decoder=``) for
every batch, so nothing is packed twice; tests check it equal to the reference model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer.decoding import thresholds as _thresholds
from transformer.decoding.fast_encoder import EncoderLayerStep, encoder_steps, fast_encode
from transformer.decoding.folded_cross import (
    FoldedMemory,
    FoldedWeights,
    fold_memory,
    folded_cross_attention,
    folded_weights,
)
from transformer.decoding.kernels import (
    attention_over_slots,
    fold_groups,
    step_attention,
    unfold_groups,
)
from transformer.decoding.packing import can_pack, int8_engine
from transformer.decoding.packing import step_linear as _step_linear
from transformer.decoding.slot_cache import Selection, SlotCache, reorder
from transformer.decoding.step_cache import StepCache
from transformer.decoding.thresholds import DecodingThresholds
from transformer.model import Transformer
from transformer.model.decoder import DecoderLayer
from transformer.model.kv_cache import KVCache
from transformer.model.masks import padding_mask

TensorFn = Callable[[Tensor], Tensor]  # (..., in) -> (..., out): a linear layer or a layer norm

# Up to ``flat_cache_max_rows`` rows (sentences x beams; transformer.decoding.thresholds) the
# self-attention caches are StepCaches: one copy a step appends a position, SDPA reads the keys
# where they lie, and beam search copies the chosen beams' rows (one call a layer) instead of
# keeping slot tables (several calls a layer); 1.1-1.2x at 5 and 20 rows on Zen 4. More rows:
# KVCaches (whose head-major keys the spelled-out attention of kernels.step_attention reads
# without a copy, from ``single_query_rows`` rows), and SlotCaches for beams, which copy nothing
# when beams are chosen (benchmarks/decoding.py). Below ``single_query_rows``, so that a
# StepCache is always read by SDPA (DecodingThresholds checks it).


@dataclass(frozen=True)
class LayerStep:
    """What one decoder layer's step calls: its linear layers (packed or not), its layer norms
    and activation as plain functions, and the model's own head split and memory projection."""

    heads: int  # H
    split_cross: Callable[[Tensor, int], tuple[Tensor, ...]]  # MultiHeadAttention.split_heads
    memory_kv: nn.Module  # cross-attention's K/V projection: once per search, not packed
    folded: FoldedWeights  # cross-attention's Q/output projections, to fold into the memory
    activation: TensorFn
    qkv: TensorFn
    self_out: TensorFn
    q: TensorFn
    cross_out: TensorFn
    ff1: TensorFn
    ff2: TensorFn
    norm1: TensorFn
    norm2: TensorFn
    norm3: TensorFn


def _norm(norm: nn.LayerNorm) -> TensorFn:
    # torch.layer_norm itself: F.layer_norm's Python wrapper costs a fifth of a row's layer norm
    return functools.partial(torch.layer_norm, normalized_shape=norm.normalized_shape,
                             weight=norm.weight, bias=norm.bias, eps=norm.eps)


# The activations as functions: a module call costs more than the activation of one row. In place
# where that is exact, on the feed-forward layer's own fresh output.
_ACTIVATION_FN: dict[type, TensorFn] = {nn.ReLU: torch.relu_, nn.GELU: F.gelu, nn.SiLU: F.silu}


def _activation(module: nn.Module) -> TensorFn:
    if type(module) is nn.GELU and module.approximate != "none":
        return module
    return _ACTIVATION_FN.get(type(module), module)


def layer_step(layer: DecoderLayer, *, pack: bool, int8: bool = False,
               thresholds: DecodingThresholds | None = None) -> LayerStep:
    """The step functions of ``layer``, its linear layers packed when ``pack``, int8 when
    ``int8``, each from the rows where ``thresholds``' crossovers say it pays (None: this
    machine's)."""
    self_attn, cross_attn, ff = layer.self_attn, layer.cross_attn, layer.feed_forward
    step_linear = functools.partial(_step_linear, int8=int8, thresholds=thresholds)
    return LayerStep(
        heads=self_attn.num_heads,
        split_cross=cross_attn.split_heads,
        memory_kv=cross_attn.kv_proj,
        folded=folded_weights(cross_attn),
        activation=_activation(ff.activation),
        qkv=step_linear(self_attn.qkv_proj, pack=pack),
        self_out=step_linear(self_attn.out_proj, pack=pack),
        q=step_linear(cross_attn.q_proj, pack=pack),
        cross_out=step_linear(cross_attn.out_proj, pack=pack),
        ff1=step_linear(ff.linear1, pack=pack),
        ff2=step_linear(ff.linear2, pack=pack),
        norm1=_norm(layer.norm1),
        norm2=_norm(layer.norm2),
        norm3=_norm(layer.norm3),
    )


class FastDecoder:
    """The cached decoding step of ``model``, for ``greedy_decode`` and ``beam_search``.

    ``pack_weights``: on a CPU in float32 outside autocast, multiply by weights reordered once for
    oneDNN (equal to ``F.linear`` up to float32 rounding, faster), the encoder's too. The packed
    copies are made on the first :meth:`start` and kept by this object (``packs`` counts how often
    they were made); a weight changed in place since (an optimizer step, ``load_state_dict``) has
    them made again. A parameter replaced by a new object is not seen: build a new decoder.

    ``thresholds``: the crossovers between ways of computing a step (products, attention
    kernels, cache layouts); None: this machine's kind of CPU's
    (:func:`~transformer.decoding.thresholds.decoding_thresholds`).
    """

    def __init__(self, model: Transformer, *, pack_weights: bool = True,
                 precision: str = "fp32", thresholds: DecodingThresholds | None = None) -> None:
        if not isinstance(model, Transformer):
            raise ValueError(f"FastDecoder decodes a transformer.Transformer, got {type(model).__name__}")
        check_precision(model, precision)
        self.model = model
        self.pack_weights = pack_weights
        self.precision = precision
        self.thresholds = _thresholds.decoding_thresholds() if thresholds is None else thresholds
        self.packs = 0
        self._steps: tuple[list[LayerStep], TensorFn] | None = None
        self._encoder: list[EncoderLayerStep] | None = None
        self._parameters = [p for module in (model.encoder, model.decoder, model.output_projection)
                            for p in module.parameters()]
        self._made_from: tuple[bool, list[tuple[int, int]]] | None = None  # (packed, weights seen)

    def _weights_seen(self) -> list[tuple[int, int]]:
        # the parameters are listed once: walking the modules costs a tenth of a millisecond, as
        # much as a short sentence's decoding step (a parameter replaced by a new object rather
        # than changed in place goes unseen: build a new decoder then)
        return [(id(p), p._version) for p in self._parameters]

    def steps(self) -> tuple[list[LayerStep], TensorFn]:
        """Every layer's :class:`LayerStep` and the output projection, packed when that applies;
        made again when a weight or whether packing applies has changed since the last call.
        The encoder's layers (:mod:`transformer.decoding.fast_encoder`) are made with them,
        packed whenever packing applies (in float32 with int8 too), else left to the model."""
        int8 = self.precision == "int8"
        packable = self.pack_weights and can_pack(self.model)
        pack = packable and not int8
        made_from = (packable, self._weights_seen())
        if self._steps is None or made_from != self._made_from:
            t = self.thresholds
            layers = [layer_step(layer, pack=pack, int8=int8, thresholds=t)
                      for layer in self.model.decoder.layers]
            self._steps = (layers, _step_linear(self.model.output_projection, pack=pack, int8=int8,
                                                thresholds=t))
            self._encoder = encoder_steps(self.model, pack=True, thresholds=t) if packable else None
            self._made_from = made_from
            self.packs += packable
        return self._steps

    def start(self, src: Tensor) -> FastSession:
        """Encode ``src`` (N, S) and return the session that decodes it step by step."""
        layers, output = self.steps()
        memory = self.model.encode(src) if self._encoder is None else fast_encode(self.model, self._encoder, src)
        return FastSession(self.model, src, memory, layers, output, thresholds=self.thresholds)


class FastSession:
    """One search's decoding state: the cross-attention keys/values and memory mask (one row per
    sentence), the self-attention caches (one row per hypothesis) and the position reached.

    A step works on rows (R, D), one new token each, and spends as few operator calls as it can
    (each costs microseconds, as much as the arithmetic of a small model's row): the token
    embedding scaled in place and the position's row of a table made once per session, heads
    split and joined by views (one query per row, so (R, H, 1, Dh) and (R, D) share their
    layout), residuals added in place to the sub-layer's fresh output, layer norms and the
    activation called as functions."""

    needs_prefix = False  # each step takes only the newest token

    def __init__(self, model: Transformer, src: Tensor, memory: Tensor, layers: list[LayerStep],
                 output: TensorFn, *, thresholds: DecodingThresholds | None = None) -> None:
        """``memory`` (N, S, D): ``src`` (N, S) encoded; ``thresholds`` None: this machine's."""
        self.model = model
        self.thresholds = _thresholds.decoding_thresholds() if thresholds is None else thresholds
        self.layers = layers
        self.output = output
        self.norm_first = model.config.norm_first
        final_norm = model.decoder.norm
        self.final_norm: nn.Module | None = None if isinstance(final_norm, nn.Identity) else final_norm
        embed = model.tgt_embed
        self.token_weight, self.token_scale, self.pad_id = embed.token.weight, embed.token.scale, embed.token.pad_id
        # (max_len, D): what the embeddings add at each position (a zero input gives the table)
        self.positions = embed.position(self.token_weight.new_zeros(1, model.config.max_len, memory.size(-1)))[0]
        # (N, 1, 1, S); None when no source has padding (SDPA is faster without a mask)
        mask = padding_mask(src, model.config.pad_id)
        self.memory_mask: Tensor | None = _unless_full(mask)
        cross = [step.split_cross(step.memory_kv(memory), 2) for step in layers]  # (N, H, S, Dh) K, V
        # Few sentences: the cross-attention projections folded into the memory (3 calls a
        # step instead of about 10), in float32 outside autocast, where rounding is float32's,
        # and when no source is all padding (the reference gives such a row a zero output).
        # Then the folded keys and values replace the projected ones.
        self.folded: list[FoldedMemory] | None = None
        if (src.size(0) <= self.thresholds.fold_max_sentences and memory.dtype == torch.float32
                and not torch.is_autocast_enabled(memory.device.type) and bool(mask.any(-1).all())):
            self.folded = [fold_memory(step.folded, k, v, self.memory_mask)
                           for step, (k, v) in zip(layers, cross, strict=True)]
        self.cross = cross if self.folded is None else []
        self.sentences = src.size(0)  # N
        self.self_caches: list[KVCache | SlotCache] = [self._flat_cache(src.size(0)) for _ in layers]
        self.length = 0

    def step(self, tokens: Tensor) -> Tensor:
        """The newest token of each row, ``tokens`` (R, 1) -> next-token logits (R, V)."""
        if self.length >= self.positions.size(0):
            raise ValueError(f"sequence of length {self.length + 1} exceeds max_len={self.positions.size(0)}")
        # the model's Embeddings in evaluation mode: token * sqrt(D) + position
        x = F.embedding(tokens[:, 0], self.token_weight, self.pad_id).mul_(self.token_scale)  # (R, D)
        x = x.add_(self.positions[self.length])
        groups = x.size(0) // self.sentences  # G
        for i, step in enumerate(self.layers):
            if self.norm_first:
                x = _residual(x, self._self_attention(i, step, step.norm1(x), groups))
                x = self._cross_attention(i, step, step.norm2(x), x, groups)
                x = _residual(x, self._feed_forward(step, step.norm3(x)))
            else:
                x = step.norm1(_residual(x, self._self_attention(i, step, x, groups)))
                x = step.norm2(self._cross_attention(i, step, x, x, groups))
                x = step.norm3(_residual(x, self._feed_forward(step, x)))
        self.length += 1
        if self.final_norm is not None:
            x = self.final_norm(x)
        return self.output(x)  # (R, V)

    def _self_attention(self, i: int, step: LayerStep, x: Tensor, groups: int) -> Tensor:
        r, d = x.shape
        qkv = step.qkv(x)  # (R, 3 * D): each row its query, key and value
        heads = qkv.view(r, 3, step.heads, 1, d // step.heads)  # (R, 3, H, 1, Dh)
        cache = self.self_caches[i]
        if isinstance(cache, StepCache):  # the key/value half of the rows is one copy
            out = step_attention(heads[:, 0], *cache.append_rows(qkv[:, d:]),
                                 thresholds=self.thresholds)  # (R, H, 1, Dh)
        else:
            q, k, v = heads.unbind(1)  # (R, H, 1, Dh) each
            if isinstance(cache, SlotCache):  # beams: attend through the slot table
                cache.append(k, v)
                out = unfold_groups(attention_over_slots(fold_groups(q, groups), *cache.grouped()), groups)
            else:
                out = step_attention(q, *cache.update(k, v), thresholds=self.thresholds)  # (R, H, 1, Dh)
        return step.self_out(out.reshape(r, d))  # heads concatenated: (R, D)

    def _cross_attention(self, i: int, step: LayerStep, x: Tensor, residual: Tensor, groups: int) -> Tensor:
        """``residual`` + the cross-attention of ``x``, both (R, D)."""
        if self.folded is not None:
            return folded_cross_attention(x, residual, self.folded[i], heads=step.heads)
        r, d = x.shape
        q = step.q(x).view(r, step.heads, 1, d // step.heads)  # (R, H, 1, Dh)
        key, value = self.cross[i]  # (N, H, S, Dh): one row per sentence, shared by its G beams
        out = step_attention(fold_groups(q, groups), key, value, self.memory_mask,
                             thresholds=self.thresholds)  # (N, H, G, Dh)
        return _residual(residual, step.cross_out(unfold_groups(out, groups).reshape(r, d)))  # (R, D)

    @staticmethod
    def _feed_forward(step: LayerStep, x: Tensor) -> Tensor:
        return step.ff2(step.activation(step.ff1(x)))  # (R, D)

    def select(self, index: Tensor, *, keep: Tensor | None, beams: int) -> None:
        """Go on with rows ``index`` (R',) of the last step, ``beams`` consecutive rows per
        sentence; ``keep`` (N',): the sentences that stay (None: all of them, in order)."""
        if keep is not None:
            self.cross = [(k.index_select(0, keep), v.index_select(0, keep)) for k, v in self.cross]
            if self.folded is not None:
                self.folded = [folded.select(keep) for folded in self.folded]
            self.sentences = keep.numel()
            if self.memory_mask is not None:
                self.memory_mask = _unless_full(self.memory_mask.index_select(0, keep))
        # Few rows: copy the chosen rows' keys (one call a layer) rather than keep slot tables,
        # whose attention costs several calls a layer; many rows: copying would cost more.
        groups = beams if index.numel() > self.thresholds.flat_cache_max_rows else 1
        selection = Selection.of(index, groups, cache=self.self_caches[0])
        flat = functools.partial(self._flat_cache, index.numel())
        self.self_caches = [reorder(cache, selection, flat=flat) for cache in self.self_caches]

    def _flat_cache(self, rows: int) -> KVCache:
        flat = rows <= self.thresholds.flat_cache_max_rows
        return StepCache(heads=self.layers[0].heads) if flat else KVCache()


def _residual(x: Tensor, sublayer: Tensor) -> Tensor:
    """``x + sublayer``, added in place to the sub-layer's fresh output when the two have one dtype
    (under autocast a sub-layer's output is 16-bit where ``x`` may be float32: then a new sum)."""
    return sublayer.add_(x) if sublayer.dtype == x.dtype else x + sublayer


def _unless_full(mask: Tensor) -> Tensor | None:
    """``mask``, or None when it lets every query see every key."""
    return None if bool(mask.all()) else mask


def check_precision(model: nn.Module, precision: str) -> None:
    """ValueError unless ``precision`` is fp32, bf16 or int8 and fits ``model``: int8 decodes a
    float32 model on a CPU (its weights are quantized from float32)."""
    if precision not in ("fp32", "bf16", "int8"):
        raise ValueError(f"precision must be fp32, bf16 or int8, got {precision!r}")
    if precision == "int8":
        weight = next(model.parameters())
        if weight.device.type != "cpu" or weight.dtype != torch.float32:
            raise ValueError("int8 decoding runs on a CPU from float32 weights, got "
                             f"{weight.dtype} on {weight.device.type}")
        if int8_engine() is None:
            raise ValueError("int8 decoding needs PyTorch's x86, fbgemm or qnnpack quantized engine")


def decoder_for(model: nn.Module, *, pack_weights: bool = True,
                precision: str = "fp32") -> FastDecoder | None:
    """A :class:`FastDecoder` of ``model`` when it is a ``Transformer``; None for any other model
    (which the reference path decodes through its ``encode``/``decode``; int8 needs the former),
    and for a model that opens its own sessions (an ``Ensemble``, which keeps its members')."""
    if callable(getattr(model, "open_session", None)):
        return None
    if isinstance(model, Transformer):
        return FastDecoder(model, pack_weights=pack_weights, precision=precision)
    if precision == "int8":
        raise ValueError(f"int8 decoding needs a transformer.Transformer, got {type(model).__name__}")
    return None
