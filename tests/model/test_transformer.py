"""Behaviour of the encoder-decoder: causality, padding invariance, the cache, attention maps,
embedding sharing and tying, and learning simple sequence tasks."""

from __future__ import annotations

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.model import TransformerOutput

PAD, BOS, EOS = 0, 1, 2
VOCAB = 20


def tiny(**overrides) -> Transformer:
    return Transformer(ModelConfig.tiny(VOCAB, dropout=0.0, **overrides)).eval()


VARIANTS = [{}, {"norm_first": True}, {"positional": "learned", "activation": "gelu"}]


@pytest.mark.parametrize("overrides", VARIANTS)
def test_changing_target_token_t_never_changes_earlier_logits(overrides):
    model = tiny(**overrides)
    src = torch.randint(3, VOCAB, (2, 6))
    tgt = torch.randint(3, VOCAB, (2, 8))
    before = model(src, tgt)
    for t in range(1, 8):
        changed = tgt.clone()
        changed[:, t] = (changed[:, t] - 3 + 1) % (VOCAB - 3) + 3
        after = model(src, changed)
        torch.testing.assert_close(after[:, :t], before[:, :t], atol=1e-6, rtol=0)
        assert not torch.allclose(after[:, t:], before[:, t:])  # later positions do see it


@pytest.mark.parametrize("overrides", VARIANTS)
def test_appending_padding_changes_no_real_output(overrides):
    model = tiny(**overrides)
    src = torch.randint(3, VOCAB, (2, 5))
    tgt = torch.randint(3, VOCAB, (2, 4))
    base = model(src, tgt)
    padded_src = torch.cat([src, torch.full((2, 3), PAD)], dim=1)
    padded_tgt = torch.cat([tgt, torch.full((2, 2), PAD)], dim=1)
    torch.testing.assert_close(model(padded_src, tgt), base, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model(padded_src, padded_tgt)[:, :4], base, atol=1e-5, rtol=1e-5)
    memory = model.encode(padded_src)
    torch.testing.assert_close(memory[:, :5], model.encode(src), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("overrides", VARIANTS)
def test_all_padding_rows_give_no_nan_anywhere(overrides):
    model = tiny(**overrides)
    src = torch.randint(3, VOCAB, (3, 5))
    tgt = torch.randint(3, VOCAB, (3, 4))
    src[1] = PAD
    tgt[2] = PAD
    out = model(src, tgt, return_attention=True)
    tensors = [out.logits, *out.attention.encoder, *out.attention.decoder, *out.attention.cross]
    assert all(torch.isfinite(t).all() for t in tensors)
    # the other rows are unaffected by the padded ones
    alone = model(src[:1], tgt[:1])
    torch.testing.assert_close(out.logits[:1], alone, atol=1e-5, rtol=1e-5)
    # and gradients stay finite too
    model.train()
    model(src, tgt).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("overrides", VARIANTS)
def test_incremental_decoding_with_cache_equals_full_pass(overrides):
    model = tiny(**overrides)
    src = torch.randint(3, VOCAB, (3, 6))
    src[1, 4:] = PAD
    tgt = torch.randint(3, VOCAB, (3, 7))
    memory = model.encode(src)
    full = model.decode(tgt, memory, src)

    cache = model.new_cache()
    steps = [model.decode(tgt[:, :1], memory, src, cache=cache)]
    for t in range(1, 7):
        steps.append(model.decode(tgt[:, t : t + 1], None, src, cache=cache))
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == 7

    # a prefix of several positions at once, then single steps
    cache = model.new_cache()
    prefix = model.decode(tgt[:, :4], memory, src, cache=cache)
    rest = [model.decode(tgt[:, t : t + 1], None, src, cache=cache) for t in range(4, 7)]
    torch.testing.assert_close(torch.cat([prefix, *rest], dim=1), full, atol=1e-5, rtol=1e-5)


def test_cache_reorder_selects_batch_rows():
    model = tiny()
    src = torch.randint(3, VOCAB, (3, 5))
    tgt = torch.randint(3, VOCAB, (3, 4))
    memory = model.encode(src)
    cache = model.new_cache()
    model.decode(tgt[:, :3], memory, src, cache=cache)
    order = torch.tensor([2, 0, 0])
    cache.reorder(order)
    step = model.decode(tgt[order, 3:4], None, src[order], cache=cache)
    full = model.decode(tgt[order], memory[order], src[order])
    torch.testing.assert_close(step[:, 0], full[:, 3], atol=1e-5, rtol=1e-5)


def test_return_attention_shapes_and_rows_sum_to_one():
    model = tiny(num_encoder_layers=2, num_decoder_layers=3)
    src = torch.randint(3, VOCAB, (2, 6))
    src[1, 3:] = PAD
    tgt = torch.randint(3, VOCAB, (2, 5))
    out = model(src, tgt, return_attention=True)
    assert isinstance(out, TransformerOutput)
    assert out.logits.shape == (2, 5, VOCAB)
    torch.testing.assert_close(out.logits, model(src, tgt))
    att = out.attention
    assert [w.shape for w in att.encoder] == [(2, 4, 6, 6)] * 2
    assert [w.shape for w in att.decoder] == [(2, 4, 5, 5)] * 3
    assert [w.shape for w in att.cross] == [(2, 4, 5, 6)] * 3
    for w in (*att.encoder, *att.decoder, *att.cross):
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    assert torch.all(att.cross[0][1, :, :, 3:] == 0)  # source padding gets no weight
    assert torch.all(att.decoder[0].triu(1) == 0)  # the future gets no weight


def test_shared_and_tied_embeddings_are_one_tensor():
    model = tiny(share_embeddings=True, tie_embeddings=True)
    assert model.src_embed.token.weight is model.tgt_embed.token.weight
    assert model.output_projection.weight is model.tgt_embed.token.weight
    untied = tiny()
    saved = untied.num_parameters() - model.num_parameters()
    assert saved == 2 * VOCAB * model.config.d_model


def test_embeddings_are_scaled_by_sqrt_d_model():
    model = tiny()
    tokens = torch.tensor([[5, 6]])
    expected = model.src_embed.token.weight[tokens] * model.config.d_model**0.5
    torch.testing.assert_close(model.src_embed.token(tokens), expected)


def test_decoding_past_max_len_is_a_clear_error():
    model = tiny(max_len=8)
    with pytest.raises(ValueError, match="max_len=8"):
        model(torch.randint(3, VOCAB, (1, 4)), torch.randint(3, VOCAB, (1, 9)))


def greedy(model: Transformer, src: torch.Tensor, length: int) -> torch.Tensor:
    """Greedy decoding of exactly ``length`` tokens with the cache (kept local: decoding/ tests
    the real decoders)."""
    memory = model.encode(src)
    cache = model.new_cache()
    token = torch.full((src.size(0), 1), BOS)
    out = []
    for step in range(length):
        logits = model.decode(token, memory if step == 0 else None, src, cache=cache)
        token = logits[:, -1:].argmax(-1)
        out.append(token)
    return torch.cat(out, dim=1)


@pytest.mark.parametrize("task", ["copy", "reverse"])
def test_tiny_model_learns_to_copy_and_reverse(task):
    torch.manual_seed(0)
    length, vocab = 6, 13
    cfg = ModelConfig.tiny(vocab, d_model=64, num_heads=4, d_ff=128, dropout=0.0,
                           num_encoder_layers=2, num_decoder_layers=2)
    model = Transformer(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.98), eps=1e-9)
    warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 50))

    def sample(n):
        src = torch.randint(3, vocab, (n, length))
        tgt = src if task == "copy" else src.flip(1)
        tgt_in = torch.cat([torch.full((n, 1), BOS), tgt[:, :-1]], dim=1)
        return src, tgt_in, tgt

    for _ in range(300):
        src, tgt_in, tgt = sample(64)
        loss = torch.nn.functional.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        warmup.step()

    model.eval()
    src, _, tgt = sample(200)  # fresh sequences
    with torch.no_grad():
        accuracy = (greedy(model, src, length) == tgt).float().mean().item()
    assert accuracy >= 0.95, f"{task}: token accuracy {accuracy:.3f}"
