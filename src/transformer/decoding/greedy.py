"""Batched greedy decoding: at each step every row takes its most probable next token.

Shapes: B batch (sentences), R rows still decoding (R <= B), S source length, T tokens produced so
far, L the most tokens any row may produce, V target vocabulary, D d_model.

With the key/value cache (the default) each step feeds only the newest token through the decoder;
``use_cache=False`` recomputes the whole prefix every step (the reference for tests and the
benchmark). A row stops at EOS or at its length limit; finished rows leave the batch, so later
steps only compute the rows still going, and the loop ends when no row is left.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer.decoding.common import (
    Seq2SeqModel,
    argmax_rows,
    checked_limits,
    evaluation_mode,
    mask_forbidden_,
    strip_padding,
    vocabulary_chunk,
)
from transformer.decoding.fast_decoder import FastDecoder
from transformer.decoding.session import Session, open_session


def greedy_decode(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    max_len: int | None = None,
    max_len_a: float | None = None,
    max_len_b: int = 0,
    min_len: int = 0,
    use_cache: bool = True,
    pack_weights: bool = True,
    decoder: FastDecoder | None = None,
    precision: str = "fp32",
) -> list[list[int]]:
    """Greedy translations of ``src`` (B, S), a batch of source ids padded with the model's pad id.

    Returns one list of target ids per row, without BOS and EOS. A row produces at most
    ``max_len`` tokens (EOS included; None: the model's ``max_len``), and with ``max_len_a`` at
    most ``floor(max_len_a * source_length + max_len_b)``, the source length counting non-pad
    tokens. EOS is not allowed before ``min_len`` tokens (useful to force lengths in benchmarks).
    PAD is never produced. Runs in evaluation mode under ``torch.inference_mode``.
    With the cache, a ``Transformer`` is decoded by the fast path
    (:class:`~transformer.decoding.fast_decoder.FastDecoder`; ``pack_weights``: on a CPU in
    float32 multiply by weights reordered once for oneDNN, equal up to float32 rounding, faster).
    ``decoder``: a ``FastDecoder(model)`` to use, so that a caller decoding many batches packs the
    weights once (``pack_weights`` is then the decoder's). ``precision="int8"``: the decoder's
    linear layers and output projection multiply by int8 weights (a float32 model on a CPU; close
    to float32, not equal); a bf16 model is decoded in bf16 as it is.
    """
    limits = checked_limits(model, src, max_len=max_len, max_len_a=max_len_a, max_len_b=max_len_b,
                            min_len=min_len)  # (B,)
    pad_id = model.config.pad_id
    with torch.inference_mode(), evaluation_mode(model):
        session = open_session(model, src, use_cache=use_cache, pack_weights=pack_weights,
                               decoder=decoder, precision=precision)
        tokens = _greedy(session, src, limits, bos_id=bos_id, eos_id=eos_id, pad_id=pad_id, min_len=min_len)
    return strip_padding(tokens.tolist(), pad_id=pad_id)


def _greedy(
    session: Session,
    src: Tensor,
    limits: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    min_len: int,
) -> Tensor:
    """The decoding loop; returns the produced ids (B, L), PAD where EOS or nothing was produced.

    Each active row's input so far (BOS + produced) is one row of ``prefix``; a row is written to
    the output only when it ends, so that a step costs few operator calls besides the model's."""
    b = src.size(0)
    steps = int(limits.max())
    out = src.new_full((b, steps), pad_id)  # (B, L)
    rows = torch.arange(b, device=src.device)  # (R,): the batch row of each active row
    row_limits = limits  # (R,)
    prefix = src.new_full((b, steps + 1), bos_id)  # (R, 1 + L): column t is the input at step t
    next_limit = int(row_limits.min())  # the first step at which a row reaches its limit
    chunk: int | None = None  # for argmax_rows, chosen on the first step
    for t in range(steps):
        tokens = prefix[:, : t + 1] if session.needs_prefix else prefix[:, t : t + 1]  # (R, t + 1 or 1)
        logits = session.step(tokens)  # (R, V)
        scores = mask_forbidden_(logits, step=t, pad_id=pad_id, eos_id=eos_id, min_len=min_len)
        if t == 0:
            chunk = vocabulary_chunk(scores.size(-1))
        next_ids = argmax_rows(scores, chunk)  # (R,)
        prefix[:, t + 1] = next_ids
        ended = next_ids == eos_id  # (R,)
        at_limit = t + 1 == next_limit  # some row reaches its limit now
        if at_limit:
            ended |= row_limits == t + 1
        if at_limit or bool(ended.any()):  # at least one row ends
            done = ended.nonzero().squeeze(1)  # (E,)
            produced = prefix[done, 1 : t + 2]  # (E, t + 1): EOS, when it ended them, last
            out[rows[done], : t + 1] = produced.masked_fill(produced == eos_id, pad_id)
            keep = (~ended).nonzero().squeeze(1)  # (R',)
            if keep.numel() == 0:
                break
            rows, row_limits, prefix = rows[keep], row_limits[keep], prefix[keep]
            session.select(keep, keep=keep, beams=1)
            next_limit = int(row_limits.min())
    return out
