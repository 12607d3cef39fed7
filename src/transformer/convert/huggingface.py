"""Our model directory -> a Hugging Face MarianMT directory (``MarianMTModel.from_pretrained``).

Marian is the paper's post-LN Transformer with shared embeddings; what differs is mapped exactly:

- Marian's sinusoids are laid out as all sines, then all cosines. A model of ours with the paper's
  interleaved table is written in a permuted basis of the residual stream: every vector of width
  d_model is reordered by the same permutation (embeddings, LayerNorms, the projections' inputs
  and the output projections' rows), which changes no output (the permutation commutes with every
  sub-layer) and turns our table into Marian's.
- Marian starts the decoder with ``decoder_start_token_id``: ours is BOS.
- Our output bias is Marian's ``final_logits_bias``.

The vocabulary keeps our ids (``vocab.json``), and our SentencePiece model(s) become
``source.spm``/``target.spm``. Note that ``MarianTokenizer`` ends every source with ``</s>``: a model
trained here without it (the default) sees one extra source token through that tokenizer (a model
imported from Marian was trained with it). Options Marian lacks (pre-LN, learned positions,
separate vocabularies) are refused with one line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from transformer.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from transformer.errors import InputError
from transformer.model.transformer import Transformer
from transformer.model_dir.output import write_new_dir

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "silu": "swish"}


def residual_permutation(config: Any) -> torch.Tensor:
    """Indices p with ``marian_vector = our_vector[p]`` for the residual stream (width D)."""
    d = config.d_model
    if config.positional_layout == "halves":
        return torch.arange(d)
    return torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])  # sines, then cosines


def check_exportable(model: Transformer) -> None:
    config = model.config
    problems = []
    if config.norm_first:
        problems.append("norm_first (pre-LN)")
    if config.positional != "sinusoidal":
        problems.append(f"positional={config.positional!r}")
    if not config.share_embeddings:
        problems.append("separate source and target embeddings (share_embeddings false)")
    if config.activation not in ACTIVATIONS:
        problems.append(f"activation={config.activation!r}")
    if config.d_model % 2:
        problems.append("an odd d_model")
    if problems:
        raise InputError(f"Marian has no {problems[0]}; this model cannot be exported to "
                         "Hugging Face MarianMT")


def marian_state(model: Transformer) -> dict[str, torch.Tensor]:
    """Our weights under MarianMTModel's names, in Marian's basis of the residual stream."""
    config = model.config
    p = residual_permutation(config)
    d = config.d_model

    def rows(t: torch.Tensor) -> torch.Tensor:  # an output that lives in the residual stream
        return t[p].contiguous()

    def cols(t: torch.Tensor) -> torch.Tensor:  # an input read from the residual stream
        return t[:, p].contiguous()

    out: dict[str, torch.Tensor] = {}

    def norm(theirs: str, module: torch.nn.LayerNorm) -> None:
        out[f"{theirs}.weight"], out[f"{theirs}.bias"] = rows(module.weight), rows(module.bias)

    def attention(theirs: str, mha: torch.nn.Module, *, cross: bool) -> None:
        if cross:
            q_w, q_b = mha.q_proj.weight, mha.q_proj.bias
            k_w, v_w = mha.kv_proj.weight.split(d)
            k_b, v_b = mha.kv_proj.bias.split(d)
        else:
            q_w, k_w, v_w = mha.qkv_proj.weight.split(d)
            q_b, k_b, v_b = mha.qkv_proj.bias.split(d)
        for name, w, b in (("q", q_w, q_b), ("k", k_w, k_b), ("v", v_w, v_b)):
            out[f"{theirs}.{name}_proj.weight"] = cols(w)
            out[f"{theirs}.{name}_proj.bias"] = b.clone()
        out[f"{theirs}.out_proj.weight"] = rows(mha.out_proj.weight)
        out[f"{theirs}.out_proj.bias"] = rows(mha.out_proj.bias)

    def ffn(theirs: str, ff: torch.nn.Module) -> None:
        out[f"{theirs}.fc1.weight"] = cols(ff.linear1.weight)
        out[f"{theirs}.fc1.bias"] = ff.linear1.bias.clone()
        out[f"{theirs}.fc2.weight"] = rows(ff.linear2.weight)
        out[f"{theirs}.fc2.bias"] = rows(ff.linear2.bias)

    embedding = cols(model.src_embed.token.weight)
    out["model.shared.weight"] = embedding
    out["model.encoder.embed_tokens.weight"] = embedding
    out["model.decoder.embed_tokens.weight"] = embedding
    for i, layer in enumerate(model.encoder.layers):
        m = f"model.encoder.layers.{i}"
        attention(f"{m}.self_attn", layer.self_attn, cross=False)
        norm(f"{m}.self_attn_layer_norm", layer.norm1)
        ffn(m, layer.feed_forward)
        norm(f"{m}.final_layer_norm", layer.norm2)
    for i, layer in enumerate(model.decoder.layers):
        m = f"model.decoder.layers.{i}"
        attention(f"{m}.self_attn", layer.self_attn, cross=False)
        norm(f"{m}.self_attn_layer_norm", layer.norm1)
        attention(f"{m}.encoder_attn", layer.cross_attn, cross=True)
        norm(f"{m}.encoder_attn_layer_norm", layer.norm2)
        ffn(m, layer.feed_forward)
        norm(f"{m}.final_layer_norm", layer.norm3)
    out["lm_head.weight"] = cols(model.output_projection.weight)
    out["final_logits_bias"] = model.output_projection.bias.detach()[None].clone()
    return {k: v.detach().float().contiguous() for k, v in out.items()}


def export_huggingface(run_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                       overwrite: bool = False) -> Path:
    """Write ``run_dir`` (ours) as a MarianMT directory: config.json, model.safetensors,
    vocab.json, source.spm, target.spm, tokenizer_config.json. Returns the directory.

    ``out_dir`` must be new or empty (InputError naming it, nothing written) unless
    ``overwrite``: then its content is replaced as a whole."""
    import transformers

    from transformer.model_dir import load_model_dir

    loaded = load_model_dir(run_dir)
    model = loaded.model
    if not isinstance(model, Transformer):
        raise InputError(f"{run_dir}: is a {type(model).__name__}, not a translation model")
    check_exportable(model)
    config = model.config
    tok_src, tok_tgt = loaded.src_tokenizer, loaded.tgt_tokenizer
    vocab = {tok_tgt.id_to_piece(i): i for i in range(tok_tgt.vocab_size)}
    marian = transformers.MarianConfig(
        vocab_size=config.tgt_vocab_size, decoder_vocab_size=config.tgt_vocab_size,
        d_model=config.d_model, encoder_layers=config.num_encoder_layers,
        decoder_layers=config.num_decoder_layers, encoder_attention_heads=config.num_heads,
        decoder_attention_heads=config.num_heads, encoder_ffn_dim=config.d_ff,
        decoder_ffn_dim=config.d_ff, max_position_embeddings=config.max_len,
        dropout=config.dropout, attention_dropout=config.attention_dropout,
        activation_dropout=config.activation_dropout,
        activation_function=ACTIVATIONS[config.activation], scale_embedding=True,
        pad_token_id=PAD_ID, eos_token_id=EOS_ID, decoder_start_token_id=BOS_ID,
        forced_eos_token_id=EOS_ID, share_encoder_decoder_embeddings=True,
        tie_word_embeddings=config.tie_embeddings, bad_words_ids=[[PAD_ID]],
    )
    hf = transformers.MarianMTModel(marian)
    missing, unexpected = hf.load_state_dict(marian_state(model), strict=False)
    missing = [k for k in missing if "embed_positions" not in k]
    if missing or unexpected:  # pragma: no cover - a transformers release with other names
        raise InputError(f"this transformers version names Marian's weights differently "
                         f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    def fill(tmp: Path) -> None:
        hf.save_pretrained(tmp)
        (tmp / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        (tmp / "source.spm").write_bytes(tok_src._proto)
        (tmp / "target.spm").write_bytes(tok_tgt._proto)
        (tmp / "tokenizer_config.json").write_text(json.dumps({
            "tokenizer_class": "MarianTokenizer", "model_max_length": config.max_len,
            "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
            "separate_vocabs": False}), encoding="utf-8")

    return write_new_dir(out_dir, fill, overwrite=overwrite)
