"""GPU check, reference: our layers equal ``torch.nn.Transformer`` with copied weights on the
device, fp32 with TF32 off: the logits in evaluation mode and the weight gradients in training
mode (dropout 0), post-LN and pre-LN."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from transformer import ModelConfig, Transformer
from transformer.convert.torch_reference import copy_from_nn_transformer as copy_weights

pytestmark = pytest.mark.cuda
GRAD_TOL = 1e-4  # weight gradients: max relative difference


def gradient_pairs(ours: Transformer, ref: nn.Transformer
                   ) -> dict[str, tuple[nn.Parameter, nn.Parameter, slice]]:
    """Matching weights of the two stacks: name -> (ours, the reference's, rows of the latter)."""
    d, every = ours.config.d_model, slice(None)
    e0, e1 = ours.encoder.layers[0], ours.encoder.layers[-1]
    d0, d1 = ours.decoder.layers[0], ours.decoder.layers[-1]
    r0, r1 = ref.encoder.layers[0], ref.encoder.layers[-1]
    q0, q1 = ref.decoder.layers[0], ref.decoder.layers[-1]
    return {
        "encoder[0] W_qkv": (e0.self_attn.qkv_proj.weight, r0.self_attn.in_proj_weight, every),
        "encoder[-1] FFN W2": (e1.feed_forward.linear2.weight, r1.linear2.weight, every),
        "decoder[0] cross W_kv": (d0.cross_attn.kv_proj.weight, q0.multihead_attn.in_proj_weight,
                                  slice(d, None)),
        "decoder[0] self W_o": (d0.self_attn.out_proj.weight, q0.self_attn.out_proj.weight, every),
        "decoder[-1] FFN W1": (d1.feed_forward.linear1.weight, q1.linear1.weight, every),
        "decoder[-1] norm3": (d1.norm3.weight, q1.norm3.weight, every),
    }


def compare_reference(gpu, dims: dict[str, int], *, norm_first: bool, batch: int, src_len: int,
                      tgt_len: int, vocab: int = 96) -> dict[str, float]:
    """Max abs difference of logits (evaluation mode, non-pad positions) and max relative
    difference of weight gradients (training mode, dropout 0) between ours and torch's."""
    device, pad = gpu.device, gpu.PAD
    torch.manual_seed(0)
    cfg = ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, dropout=0.0,
                      norm_first=norm_first, max_len=max(src_len, tgt_len), **dims)
    ours = Transformer(cfg)
    with warnings.catch_warnings():  # torch: nested tensors are off for pre-LN encoders
        warnings.simplefilter("ignore")
        ref = nn.Transformer(d_model=cfg.d_model, nhead=cfg.num_heads,
                             num_encoder_layers=cfg.num_encoder_layers,
                             num_decoder_layers=cfg.num_decoder_layers, dim_feedforward=cfg.d_ff,
                             dropout=0.0, batch_first=True, norm_first=norm_first)
    if not norm_first:  # the paper's post-LN stacks have no final norm
        ref.encoder.norm = None
        ref.decoder.norm = None
    copy_weights(ours, ref)
    ours, ref = ours.to(device), ref.to(device)
    src = gpu.random_sources(batch, vocab, min_len=2, max_len=src_len, seed=1).to(device)
    tgt = gpu.random_sources(batch, vocab, min_len=1, max_len=tgt_len, seed=2).to(device)
    t = tgt.size(1)
    masks = dict(src_key_padding_mask=src == pad, tgt_key_padding_mask=tgt == pad,
                 memory_key_padding_mask=src == pad,
                 tgt_mask=torch.triu(torch.ones(t, t, dtype=torch.bool, device=device), 1))
    keep = tgt != pad  # padding positions may differ (torch's fast path zeroes them)

    def theirs() -> torch.Tensor:
        return ours.output_projection(ref(ours.src_embed(src), ours.tgt_embed(tgt), **masks))

    ours.eval(), ref.eval()
    with torch.no_grad(), warnings.catch_warnings():  # torch: nested tensors are a prototype
        warnings.simplefilter("ignore")
        got, want = ours(src, tgt), theirs()
    diff = (got[keep] - want[keep]).abs()
    forward = diff.max().item()
    # allclose(atol=rtol=tol) holds exactly when this is <= tol
    allclose_tol = (diff / (1 + want[keep].abs())).max().item()
    # gradients: the embeddings and output projection are shared, so one backward at a time
    ours.train(), ref.train()
    weights = torch.randn(got.shape, generator=torch.Generator().manual_seed(3)).to(device)
    grads: dict[str, torch.Tensor] = {}
    ours.zero_grad(set_to_none=True)
    (ours(src, tgt)[keep] * weights[keep]).sum().backward()
    for name, (mine, _, _) in gradient_pairs(ours, ref).items():
        grads[name] = mine.grad.detach().clone()
    ours.zero_grad(set_to_none=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (theirs()[keep] * weights[keep]).sum().backward()
    rel = {}
    for name, (_, other, rows) in gradient_pairs(ours, ref).items():
        want = other.grad[rows]
        rel[name] = ((grads[name] - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()
    return {"logits_max_abs_diff": forward, "logits_allclose_tol": allclose_tol,
            "grad_max_rel_diff": max(rel.values()), "grad_rel_diff": rel}


@pytest.fixture
def no_tf32():
    """fp32 as written: TF32 off for matmuls and cuDNN, restored afterwards."""
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


@pytest.mark.timeout(45)
def test_our_layers_equal_nn_transformer(gpu, record, no_tf32):
    configs = [("d32 h4 2+3 d_ff48", dict(d_model=32, num_heads=4, num_encoder_layers=2,
                                          num_decoder_layers=3, d_ff=48), 1e-5, (4, 9, 7))]
    if not gpu.quick:
        configs.append(("d512 h8 2+2 d_ff2048", dict(d_model=512, num_heads=8,
                                                     num_encoder_layers=2, num_decoder_layers=2,
                                                     d_ff=2048), 1e-4, (8, 33, 29)))
    record.tolerance = ("fp32, TF32 off: logits allclose atol=rtol="
                        + ", ".join(f"{tol:g} ({label.split()[0]})" for label, _, tol, _ in configs)
                        + f"; weight grads max rel diff <= {GRAD_TOL:g}")
    worst_fwd = worst_grad = 0.0
    for label, dims, tol, (b, s, t) in configs:
        for norm_first in (False, True):
            name = f"{label} {'pre-LN' if norm_first else 'post-LN'}"
            r = compare_reference(gpu, dims, norm_first=norm_first, batch=b, src_len=s, tgt_len=t)
            record.figures[name] = r
            record.check(f"{name}: logits", r["logits_allclose_tol"] <= tol,
                         f"max abs diff {r['logits_max_abs_diff']:.2e}, allclose at "
                         f"{r['logits_allclose_tol']:.1e}")
            record.check(f"{name}: weight gradients", r["grad_max_rel_diff"] <= GRAD_TOL,
                         f"max rel diff {r['grad_max_rel_diff']:.2e}")
            worst_fwd = max(worst_fwd, r["logits_max_abs_diff"])
            worst_grad = max(worst_grad, r["grad_max_rel_diff"])
    record.summary = (f"{len(record.checks) // 2} models (post-LN, pre-LN): logits max abs diff "
                      f"{worst_fwd:.1e}, grads max rel diff {worst_grad:.1e}")
    assert not record.failures(), "\n".join(record.failures())
