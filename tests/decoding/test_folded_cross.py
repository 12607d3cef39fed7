"""Cross-attention with its projections folded into the memory equals the model's cross-attention
module (float32 rounding apart), for beams sharing a sentence's memory and for padded sources."""

from __future__ import annotations

import pytest
import torch

from transformer.decoding.folded_cross import (
    fold_memory,
    folded_cross_attention,
    folded_weights,
)
from transformer.model import MultiHeadAttention, padding_mask


@pytest.mark.parametrize("groups", [1, 3])
def test_folded_equals_the_module(groups):
    torch.manual_seed(0)
    d, heads, n, s = 16, 4, 3, 7
    attn = MultiHeadAttention(d_model=d, num_heads=heads, dropout=0.0, cross=True).eval()
    with torch.no_grad():  # biases large enough that dropping one shows
        for p in attn.parameters():
            if p.dim() == 1:
                p.normal_(0, 1)
    src = torch.randint(1, 9, (n, s))
    src[1, 4:] = 0  # padding
    src[2, 1:] = 0
    memory = torch.randn(n, s, d)
    mask = padding_mask(src, 0)  # (N, 1, 1, S)
    x = torch.randn(n * groups, d)  # G consecutive rows per sentence
    residual = torch.randn(n * groups, d)
    with torch.inference_mode():
        key, value = attn.split_heads(attn.kv_proj(memory), 2)  # (N, H, S, Dh)
        folded = fold_memory(folded_weights(attn), key, value, mask)
        got = folded_cross_attention(x, residual, folded, heads=heads)
        rows = torch.arange(n).repeat_interleave(groups)
        want, _ = attn(x[:, None], memory[rows], mask=mask[rows])
        torch.testing.assert_close(got, residual + want[:, 0], atol=1e-5, rtol=1e-5)
        keep = torch.tensor([2, 0])
        kept = folded.select(keep)
        rows = keep.repeat_interleave(groups)
        got = folded_cross_attention(x[: 2 * groups], residual[: 2 * groups], kept, heads=heads)
        want, _ = attn(x[: 2 * groups, None], memory[rows], mask=mask[rows])
        torch.testing.assert_close(got, residual[: 2 * groups] + want[:, 0], atol=1e-5, rtol=1e-5)


def test_only_cross_attention_folds():
    attn = MultiHeadAttention(d_model=8, num_heads=2, dropout=0.0)
    with pytest.raises(ValueError, match="cross-attention"):
        folded_weights(attn)
