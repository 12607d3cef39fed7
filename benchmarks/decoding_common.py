"""Shared by the decoding benchmark's suites (benchmarks/decoding.py): the models, the sources and
a timer."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch

from transformer import ModelConfig, Transformer

PAD, BOS, EOS = 0, 2, 3


def build_models(*, vocab: int, d_model: int, heads: int, layers: int, d_ff: int, hf: bool):
    """Our Transformer and (optionally) a Hugging Face Marian model of the same shape."""
    config = ModelConfig(
        src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model, num_heads=heads,
        num_encoder_layers=layers, num_decoder_layers=layers, d_ff=d_ff, dropout=0.0,
        max_len=256, share_embeddings=True, tie_embeddings=True,
    )
    torch.manual_seed(0)
    ours = Transformer(config).eval()
    theirs = None
    if hf:
        from transformers import MarianConfig, MarianMTModel
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        theirs = MarianMTModel(
            MarianConfig(
                vocab_size=vocab, d_model=d_model, encoder_layers=layers, decoder_layers=layers,
                encoder_attention_heads=heads, decoder_attention_heads=heads,
                encoder_ffn_dim=d_ff, decoder_ffn_dim=d_ff, max_position_embeddings=256,
                activation_function="relu", dropout=0.0, attention_dropout=0.0,
                activation_dropout=0.0, pad_token_id=PAD, eos_token_id=EOS, bos_token_id=BOS,
                decoder_start_token_id=BOS, forced_eos_token_id=None,
            )
        ).eval()
    return ours, theirs


def random_sources(*, batch: int, src_len: int, vocab: int, seed: int) -> torch.Tensor:
    """(batch, src_len) ids, right-padded, lengths spread over [src_len / 2, src_len]."""
    g = torch.Generator().manual_seed(seed)
    src = torch.full((batch, src_len), PAD, dtype=torch.long)
    for i in range(batch):
        n = src_len // 2 + int(torch.randint(0, src_len - src_len // 2 + 1, (1,), generator=g))
        src[i, :n] = torch.randint(4, vocab, (n,), generator=g)
    return src


def timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    """Run ``fn``: (wall seconds, CPU seconds of this process, what it returned)."""
    wall, cpu = time.perf_counter(), time.process_time()
    returned = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, returned


def test_set_file(lang: str) -> Path:
    """Multi30k's test_2016_flickr in ``lang``, found where the package looks for corpora
    (:func:`transformer.data.corpora.find_file`); SystemExit naming it when it is nowhere."""
    from transformer.data.corpora import find_file

    name = f"test_2016_flickr.{lang}.gz"
    found = find_file("multi30k", name)
    if found is None:
        raise SystemExit(f"multi30k/{name}: not found (set TRANSFORMER_DATA, or put the shared data "
                         "folder beside the checkout)")
    return found
