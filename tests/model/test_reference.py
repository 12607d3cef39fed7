"""Our layers equal torch.nn.Transformer's with copied weights (eval mode, 1e-5).

torch.nn.Transformer always ends both stacks with a LayerNorm, which the paper's post-LN model does
not have (each sub-layer already ends in one); for the post-LN comparison those final norms are
removed from the reference, for pre-LN they are kept and copied, as our pre-LN stacks have them.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer import ModelConfig, Transformer
from transformer.convert.torch_reference import copy_from_nn_transformer as copy_weights

PAD = 0


def build_pair(norm_first: bool, activation: str = "relu") -> tuple[Transformer, nn.Transformer]:
    cfg = ModelConfig.tiny(
        40, d_model=32, num_heads=4, d_ff=48, num_encoder_layers=2, num_decoder_layers=3,
        dropout=0.0, norm_first=norm_first, activation=activation,
    )
    ours = Transformer(cfg).eval()
    ref = nn.Transformer(
        d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=3, dim_feedforward=48,
        dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first,
    ).eval()
    if not norm_first:
        ref.encoder.norm = None
        ref.decoder.norm = None
    copy_weights(ours, ref)
    return ours, ref


def padded_batch() -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.randint(4, 40, (3, 9))
    src[1, 6:] = PAD
    src[2, 3:] = PAD
    tgt = torch.randint(4, 40, (3, 7))
    tgt[0, 5:] = PAD
    tgt[2, 2:] = PAD
    return src, tgt


def reference_masks(src, tgt):
    t = tgt.size(1)
    return dict(
        src_key_padding_mask=src == PAD,  # torch: True = ignore
        tgt_key_padding_mask=tgt == PAD,
        memory_key_padding_mask=src == PAD,
        tgt_mask=torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1),
    )


def close_where_real(actual, expected, tokens):
    keep = tokens != PAD  # padding positions are free to differ (torch may zero them)
    torch.testing.assert_close(actual[keep], expected[keep], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_equals_torch(norm_first):
    ours, ref = build_pair(norm_first)
    src, _ = padded_batch()
    x = ours.src_embed(src)
    expected = ref.encoder(x, src_key_padding_mask=src == PAD)
    close_where_real(ours.encode(src), expected, src)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_equals_torch(norm_first):
    ours, ref = build_pair(norm_first)
    src, tgt = padded_batch()
    memory = ours.encode(src)
    masks = reference_masks(src, tgt)
    hidden = ref.decoder(
        ours.tgt_embed(tgt), memory, tgt_mask=masks["tgt_mask"],
        tgt_key_padding_mask=masks["tgt_key_padding_mask"],
        memory_key_padding_mask=masks["memory_key_padding_mask"],
    )
    close_where_real(ours.decode(tgt, memory, src), ours.output_projection(hidden), tgt)


@pytest.mark.parametrize(("norm_first", "activation"), [(False, "relu"), (True, "relu"), (False, "gelu")])
def test_full_model_equals_torch(norm_first, activation):
    ours, ref = build_pair(norm_first, activation)
    src, tgt = padded_batch()
    hidden = ref(ours.src_embed(src), ours.tgt_embed(tgt), **reference_masks(src, tgt))
    close_where_real(ours(src, tgt), ours.output_projection(hidden), tgt)
