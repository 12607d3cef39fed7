"""One sentence through a trained model, with every attention map and the tokens to label them.

Shapes: L layers, H heads, S source tokens, T target positions (BOS + the translation).

For a translation model the sentence is translated greedily, then the translation is fed back
teacher-forced (``BOS + translation``) to read the attention that produced it: decoder row t is the
position that predicts output token t (the translation's tokens, then EOS). A classifier reads the
sentence once; with CLS pooling its first position is the CLS vector.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from transformer.errors import InputError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from transformer.data.tokenizer import Tokenizer
    from transformer.model_dir import LoadedModel

KINDS = ("encoder", "decoder", "cross", "alignment")


@dataclass
class SentenceAttention:
    """Attention maps of one sentence and the labels of their axes."""

    text: str
    src_tokens: list[str]  # (S,) source pieces (with "[CLS]" first for CLS pooling)
    encoder: list[Tensor]  # per layer (H, S, S)
    decoder: list[Tensor]  # per layer (H, T, T); empty for a classifier
    cross: list[Tensor]  # per layer (H, T, S); empty for a classifier
    tgt_in_tokens: list[str]  # (T,) BOS + translation pieces: decoder queries and keys
    tgt_out_tokens: list[str]  # (T,) translation pieces + EOS: what each decoder row predicts
    output: str  # the translation, or the predicted label for a classifier
    task: str  # "translation" or "classification"


def _pieces(tokenizer: Tokenizer, ids: Sequence[int]) -> list[str]:
    return [tokenizer.id_to_piece(int(i)) for i in ids]


def _first(weights: Sequence[Tensor]) -> list[Tensor]:
    return [w[0].detach().float().cpu() for w in weights]  # drop the batch of one: (H, Lq, Lk)


@torch.no_grad()
def sentence_attention(loaded: LoadedModel, text: str, *, max_len: int | None = None,
                       target: str | None = None) -> SentenceAttention:
    """Run ``text`` through ``loaded`` (a :class:`~transformer.model_dir.LoadedModel`).

    Translation models translate greedily (at most ``max_len`` tokens; default the model's limit),
    or read the given ``target`` instead (forced decoding), and return encoder, decoder and
    cross-attention; classifiers return encoder attention and the predicted label. Raises
    InputError for an empty sentence or one that encodes to no tokens.
    """
    from transformer.data.tokenizer import BOS_ID, EOS_ID

    if not text.strip():
        raise InputError("the sentence is empty")
    model = loaded.model
    model.eval()
    device = next(model.parameters()).device
    src_tok = loaded.src_tokenizer
    task = loaded.task
    ids = src_tok.encode(text)
    if not ids:
        raise InputError(f"the sentence {text!r} encodes to no tokens")
    if task == "classification":
        ids = ids[: model.max_tokens]
        tokens = torch.tensor([ids], dtype=torch.long, device=device)  # (1, S)
        out = model(tokens, return_attention=True)
        labels = loaded.record.labels
        if model.multi_label:
            probs = out.logits[0].float().sigmoid()  # (C,)
        else:
            probs = out.logits[0].float().softmax(-1)  # (C,)
        best = int(probs.argmax())
        prefix = ["[CLS]"] if model.pooling == "cls" else []
        return SentenceAttention(text, prefix + _pieces(src_tok, ids), _first(out.attention.encoder),
                                 [], [], [], [], f"{labels[best]} ({float(probs[best]):.2f})",
                                 task)

    from transformer.decoding import greedy_decode

    tgt_tok = loaded.tgt_tokenizer
    limit = model.config.max_len
    ids = ids[:limit]
    src = torch.tensor([ids], dtype=torch.long, device=device)  # (1, S)
    if target is not None:
        hyp = tgt_tok.encode(target)
    else:
        hyp = greedy_decode(model, src, bos_id=BOS_ID, eos_id=EOS_ID,
                            max_len=min(max_len or limit, limit))[0]
    hyp = hyp[: limit - 1]  # BOS + translation must fit the model's positions
    tgt_in = torch.tensor([[BOS_ID, *hyp]], dtype=torch.long, device=device)  # (1, T)
    out = model(src, tgt_in, return_attention=True)
    pieces = _pieces(tgt_tok, hyp)
    return SentenceAttention(
        text=text,
        src_tokens=_pieces(src_tok, ids),
        encoder=_first(out.attention.encoder),
        decoder=_first(out.attention.decoder),
        cross=_first(out.attention.cross),
        tgt_in_tokens=[tgt_tok.id_to_piece(BOS_ID), *pieces],
        tgt_out_tokens=[*pieces, tgt_tok.id_to_piece(EOS_ID)],
        output=tgt_tok.decode(hyp),
        task=task,
    )


def _quote(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return f'"{text if len(text) <= limit else text[: limit - 1] + "…"}"'


def draw_attention(att: SentenceAttention, kind: str, *, layer: int | None = None) -> Figure:
    """The Figure of one ``kind`` of attention: ``encoder``, ``decoder`` or ``cross`` (a grid of
    layers x heads), or ``alignment`` (cross-attention of ``layer``, counted from 1, default the
    last, averaged over heads). InputError when the model has no such attention or layer."""
    from transformer.visualization.attention import (
        average_heads,
        plot_alignment,
        plot_attention_grid,
    )

    if kind not in KINDS:
        raise InputError(f"unknown attention kind {kind!r}; choose from {', '.join(KINDS)}")
    if att.task == "classification":
        if kind != "encoder":
            raise InputError(f"a classifier has only encoder self-attention, not {kind!r}")
        return plot_attention_grid(
            att.encoder, query_tokens=att.src_tokens, key_tokens=att.src_tokens,
            title=f"encoder self-attention: {_quote(att.text)} -> {att.output}")
    arrow = f"{_quote(att.text)} -> {_quote(att.output)}"
    if kind == "encoder":
        return plot_attention_grid(att.encoder, query_tokens=att.src_tokens,
                                   key_tokens=att.src_tokens,
                                   title=f"encoder self-attention: {_quote(att.text)}")
    if kind == "decoder":
        return plot_attention_grid(att.decoder, query_tokens=att.tgt_in_tokens,
                                   key_tokens=att.tgt_in_tokens,
                                   title=f"decoder self-attention (masked): {_quote(att.output)}")
    if kind == "cross":
        return plot_attention_grid(att.cross, query_tokens=att.tgt_out_tokens,
                                   key_tokens=att.src_tokens,
                                   title=f"encoder-decoder attention: {arrow}")
    n = len(att.cross)
    chosen = n if layer is None else layer
    if not 1 <= chosen <= n:
        raise InputError(f"--layer {layer} is outside the decoder's layers 1..{n}")
    return plot_alignment(average_heads(att.cross[chosen - 1]), att.src_tokens, att.tgt_out_tokens,
                          title=f"alignment, layer {chosen} of {n}, heads averaged: {arrow}")


def save_attention(att: SentenceAttention, out: str | os.PathLike[str] | None = None, *,
                   kind: str | None = None, layer: int | None = None,
                   svg: bool = False) -> tuple[str, list[Path]]:
    """Draw and write the attention of ``att``: ``kind`` (default ``cross`` for a translation,
    ``encoder`` for a classifier) to ``out`` (default ``attention-KIND.png``), and for a
    translation's grid also its alignment beside it (``OUT-alignment.png``). Returns the kind drawn
    and every file written (atomically, by :func:`~transformer.visualization.figures.save_figure`)."""
    from transformer.visualization.figures import save_figure

    classifier = att.task == "classification"
    kind = kind or ("encoder" if classifier else "cross")
    path = Path(out or f"attention-{kind}.png")
    figures = [(path, draw_attention(att, kind, layer=layer))]
    if not classifier and kind != "alignment":
        figures.append((path.with_name(f"{path.stem}-alignment{path.suffix}"),
                        draw_attention(att, "alignment", layer=layer)))
    return kind, [f for target, fig in figures for f in save_figure(fig, target, svg=svg)]

