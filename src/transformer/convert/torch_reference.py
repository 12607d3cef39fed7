"""PyTorch's own ``torch.nn.Transformer`` weights -> ours, the reference every layer is proven
against (tests/model/test_reference.py, benchmarks/gpu_check.py).

nn.Transformer keeps each attention's Q, K and V projections in one ``in_proj`` matrix (rows W^Q,
then W^K, then W^V); ours fuses Q/K/V for self-attention and K/V for cross-attention, so the rows
map one to one. Its stacks end with a LayerNorm: copied when ours has one (pre-LN); for the paper's
post-LN model remove them from the reference first (``ref.encoder.norm = None``).
"""

from __future__ import annotations

import torch
from torch import nn

from transformer.model import Transformer


def _copy_linear(dst: nn.Linear, weight: torch.Tensor, bias: torch.Tensor) -> None:
    dst.weight.copy_(weight)
    dst.bias.copy_(bias)


@torch.no_grad()
def copy_from_nn_transformer(ours: Transformer, ref: nn.Transformer) -> None:
    """Copy ``ref``'s encoder and decoder stacks into ``ours`` (same shape; embeddings and the
    output projection, which nn.Transformer does not have, are left alone)."""
    d = ours.config.d_model
    for mine, theirs in zip(ours.encoder.layers, ref.encoder.layers, strict=True):
        _copy_linear(mine.self_attn.qkv_proj, theirs.self_attn.in_proj_weight,
                     theirs.self_attn.in_proj_bias)
        mine.self_attn.out_proj.load_state_dict(theirs.self_attn.out_proj.state_dict())
        mine.feed_forward.linear1.load_state_dict(theirs.linear1.state_dict())
        mine.feed_forward.linear2.load_state_dict(theirs.linear2.state_dict())
        mine.norm1.load_state_dict(theirs.norm1.state_dict())
        mine.norm2.load_state_dict(theirs.norm2.state_dict())
    for mine, theirs in zip(ours.decoder.layers, ref.decoder.layers, strict=True):
        _copy_linear(mine.self_attn.qkv_proj, theirs.self_attn.in_proj_weight,
                     theirs.self_attn.in_proj_bias)
        mine.self_attn.out_proj.load_state_dict(theirs.self_attn.out_proj.state_dict())
        w, b = theirs.multihead_attn.in_proj_weight, theirs.multihead_attn.in_proj_bias
        _copy_linear(mine.cross_attn.q_proj, w[:d], b[:d])  # W^Q rows, then W^K and W^V rows
        _copy_linear(mine.cross_attn.kv_proj, w[d:], b[d:])
        mine.cross_attn.out_proj.load_state_dict(theirs.multihead_attn.out_proj.state_dict())
        mine.feed_forward.linear1.load_state_dict(theirs.linear1.state_dict())
        mine.feed_forward.linear2.load_state_dict(theirs.linear2.state_dict())
        for i in (1, 2, 3):
            getattr(mine, f"norm{i}").load_state_dict(getattr(theirs, f"norm{i}").state_dict())
    if ours.config.norm_first:
        ours.encoder.norm.load_state_dict(ref.encoder.norm.state_dict())
        ours.decoder.norm.load_state_dict(ref.decoder.norm.state_dict())
