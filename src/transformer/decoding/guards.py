"""Repetition guards, as Hugging Face ``generate`` defines them (``repetition_penalty`` and
``no_repeat_ngram_size``; transformers' ``RepetitionPenaltyLogitsProcessor`` and
``NoRepeatNGramLogitsProcessor``), as pure functions of the scores and the history.

Shapes: R rows (hypotheses), T tokens of history, V target vocabulary.

Forbidden sequences (:func:`ban_sequences`: target phrases no output may contain) act the same
way, after the other two.

The history of a row is everything the decoder has been given: BOS, then the target prefix and
the tokens produced, as in Hugging Face, where ``input_ids`` starts with the decoder start token.
Greedy decoding and sampling apply the guards to the logits, beam search to the log-probabilities
(as Hugging Face does: its beam search normalises first, then processes), before choosing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor


def penalize_repetitions(scores: Tensor, history: Tensor, penalty: float) -> Tensor:
    """``scores`` (R, V) with every token that occurs in its row's ``history`` (R, T) penalised
    once (however often it occurs): a negative score multiplied by ``penalty``, any other divided
    by it (Keskar et al., 2019, as Hugging Face's ``repetition_penalty``). A new tensor."""
    seen = scores.gather(1, history)  # (R, T)
    penalised = torch.where(seen < 0, seen * penalty, seen / penalty)
    return scores.scatter(1, history, penalised)


def ban_repeated_ngrams(scores: Tensor, history: Tensor, n: int) -> Tensor:
    """``scores`` (R, V) with -inf for every token that would complete, after the last ``n - 1``
    tokens of its row's ``history`` (R, T), an ``n``-gram the history already holds (Hugging
    Face's ``no_repeat_ngram_size``; ``n = 1``: no token twice). A new tensor (the same one when
    the history is shorter than ``n``)."""
    r, t = history.shape
    if t < n:
        return scores
    last = history[:, t - n + 1 :]  # (R, n - 1): the n-gram a next token would complete
    windows = history.unfold(1, n, 1)  # (R, t - n + 1, n): every n-gram so far
    matches = (windows[..., :-1] == last[:, None]).all(dim=-1)  # (R, t - n + 1)
    v = scores.size(1)
    # a window that does not match bans a spare column past the vocabulary, so it unbans nothing
    banned = scores.new_zeros((r, v + 1), dtype=torch.bool)
    banned.scatter_(1, windows[..., -1].masked_fill(~matches, v), True)
    return scores.masked_fill(banned[:, :v], -math.inf)


def guarded(scores: Tensor, history: Tensor, *, no_repeat_ngram: int, repetition_penalty: float) -> Tensor:
    """``scores`` (R, V) after both guards (the penalty first, as Hugging Face orders them);
    ``scores`` itself when both are off (``no_repeat_ngram`` 0, ``repetition_penalty`` 1)."""
    if repetition_penalty != 1.0:
        scores = penalize_repetitions(scores, history, repetition_penalty)
    if no_repeat_ngram > 0:
        scores = ban_repeated_ngrams(scores, history, no_repeat_ngram)
    return scores


def ban_sequences(scores: Tensor, history: Tensor, sequences: Sequence[Sequence[int]]) -> Tensor:
    """``scores`` (R, V) with -inf for every token that would complete one of ``sequences`` (token
    id lists) after its row's ``history`` (R, T): the last token of a sequence is banned where the
    history ends with the rest of it (a one-token sequence: always), as Hugging Face's
    ``bad_words_ids`` and CTranslate2's ``suppress_sequences``. A new tensor (the same one
    without sequences)."""
    if not sequences:
        return scores
    r, t = history.shape
    banned = torch.zeros_like(scores, dtype=torch.bool)  # (R, V)
    for sequence in sequences:
        *head, last = sequence
        if not head:
            banned[:, last] = True
        elif len(head) <= t:
            ends = history[:, t - len(head) :] == history.new_tensor(head)  # (R, len(head))
            banned[:, last] |= ends.all(dim=1)
    return scores.masked_fill(banned, -math.inf)
