"""Lexical constraints: target phrases every translation must contain, by dynamic beam
allocation (Post & Vilar, 2018, "Fast Lexically Constrained Decoding with Dynamic Beam
Allocation"; fairseq's ``--constraints``, Sockeye's ``lexical_constraints``).

Shapes: B sentences, N sentences still searching, K beams, M the most phrases a sentence has,
P the longest phrase, C candidates per sentence, V target vocabulary.

Each sentence has its own phrases (token ids, none at all for some sentences of a batch). A
hypothesis tracks which phrases it has met and how far it is into the one it is meeting. Each
step, the candidates of a sentence are the usual best ``2K`` extensions, plus every live
hypothesis extended by each token that would advance its constraints (the next token of the
phrase it is in; else the first token of each phrase not yet met), plus every live hypothesis
extended by its own best token. Candidates are grouped into banks by how many constraint tokens
they have met, and the beam is dealt out across banks in turn (the best of the fullest bank,
the best of the next, ..., then the second best of each; a bank with too few candidates leaves
its places to the others), so hypotheses that have met more constraints keep places in the beam
even when the model finds them less likely. EOS is forbidden to a hypothesis until it has met
every phrase. A phrase begun and then left resets (the token that left it may begin another).
A phrase may appear anywhere in the translation and the phrases in any order; when two phrases
begin with the same token, the one given first is the one begun.

A sentence without phrases has one bank: its candidates are ranked by score alone, which is
plain beam search's order, so its output is plain beam search's, token for token.

A phrase is a word or words, not the start of a longer one: given the pieces that continue a word
(``word_tails``: a subword tokenizer's pieces without a word-start mark that begin with a letter or
digit), a hypothesis that has just met a phrase may not extend it with one, so "Hund" is met by
"Hund ..." or "Hund." but never turns into "Hunde" (with the reference nouns of Multi30k's test
set as constraints, 3% of them did so before this rule; benchmarks/constraints.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from transformer.decoding.ranking import argmax_rows, top_candidates


@dataclass(frozen=True)
class Progress:
    """How far each hypothesis is through its sentence's phrases."""

    met: Tensor  # (N, K, M) bool: phrases met
    current: Tensor  # (N, K) long: the phrase being met (-1: none)
    position: Tensor  # (N, K) long: its tokens met so far (0 when none)
    ended: Tensor  # (N, K) bool: the last token completed a phrase

    def pick(self, beams: Tensor) -> Progress:
        """The progress of hypotheses ``beams`` (N, C) of each sentence -> (N, C, ...)."""
        return Progress(self.met.gather(1, beams[:, :, None].expand(-1, -1, self.met.size(2))),
                        self.current.gather(1, beams), self.position.gather(1, beams),
                        self.ended.gather(1, beams))

    def keep(self, keep: Tensor) -> Progress:
        """Only sentences ``keep`` (N',)."""
        return Progress(self.met[keep], self.current[keep], self.position[keep], self.ended[keep])


@dataclass(frozen=True)
class Constraints:
    """Each sentence's phrases: ``tokens`` (B, M, P) long (anything past a phrase's length is
    never read) and ``lengths`` (B, M) long (0: no phrase in that place); ``word_tails`` (V,)
    bool, the pieces that may not follow a phrase just met (None: any may)."""

    tokens: Tensor
    lengths: Tensor
    word_tails: Tensor | None = None

    @classmethod
    def of(cls, constraints: Sequence[Sequence[Sequence[int]]] | None, *, rows: int, pad_id: int,
           device: torch.device | str, word_tails: Sequence[int] | None = None,
           vocab_size: int | None = None) -> Constraints | None:
        """From a list of phrases (id lists) per sentence (``rows`` of them); None when no
        sentence has a phrase (the search is then plain beam search). ``word_tails``: ids of the
        pieces that continue a word (``vocab_size`` then sizes the mask). ValueError for a count
        that is not ``rows``, an empty phrase or one holding ``pad_id``."""
        if constraints is None:
            return None
        if len(constraints) != rows:
            raise ValueError(f"constraints: {len(constraints)} given for {rows} sentences")
        most = max((len(phrases) for phrases in constraints), default=0)
        if most == 0:
            return None
        longest = max(len(p) for phrases in constraints for p in phrases)
        tokens = torch.full((rows, most, max(longest, 1)), pad_id, dtype=torch.long)
        lengths = torch.zeros((rows, most), dtype=torch.long)
        for i, phrases in enumerate(constraints):
            for j, phrase in enumerate(phrases):
                if len(phrase) == 0:
                    raise ValueError(f"constraints[{i}][{j}] is empty")
                if pad_id in phrase:
                    raise ValueError(f"constraints[{i}][{j}] holds the pad id {pad_id}, which is never a word")
                tokens[i, j, : len(phrase)] = torch.as_tensor(list(phrase), dtype=torch.long)
                lengths[i, j] = len(phrase)
        tails = None
        if word_tails:
            if vocab_size is None:
                raise ValueError("word_tails needs the vocabulary size")
            tails = torch.zeros(vocab_size, dtype=torch.bool)
            tails[torch.as_tensor(list(word_tails), dtype=torch.long)] = True
            tails = tails.to(device)
        return cls(tokens.to(device), lengths.to(device), tails)

    @property
    def banks(self) -> int:
        """How many banks the beam is dealt across: one per count of tokens met, 0 to the most."""
        return int(self.lengths.sum(dim=1).max()) + 1

    def limits(self, limits: Tensor, *, model_max_len: int) -> Tensor:
        """Each sentence's most tokens (B,), raised by its constraint tokens so that they fit
        besides what the model would say (within the model's positions). ValueError when a
        sentence's phrases alone leave no room for EOS in ``model_max_len`` positions."""
        total = self.lengths.sum(dim=1)  # (B,)
        if int(total.max()) + 1 > model_max_len:
            raise ValueError(f"constraints of {int(total.max())} tokens in all leave no room to "
                             f"decode: the model has {model_max_len} target positions")
        return (limits + total).clamp(max=model_max_len)

    def start(self, rows: int) -> Progress:
        """Nothing met: one hypothesis per sentence."""
        device, m = self.tokens.device, self.lengths.size(1)
        return Progress(torch.zeros((rows, 1, m), dtype=torch.bool, device=device),
                        torch.full((rows, 1), -1, dtype=torch.long, device=device),
                        torch.zeros((rows, 1), dtype=torch.long, device=device),
                        torch.zeros((rows, 1), dtype=torch.bool, device=device))

    def complete(self, progress: Progress, rows: Tensor) -> Tensor:
        """Which hypotheses (N, K) of sentences ``rows`` (N,) have met every phrase."""
        return (progress.met | (self.lengths[rows] == 0)[:, None, :]).all(dim=2)

    def met_tokens(self, progress: Progress, rows: Tensor) -> Tensor:
        """Constraint tokens met (N, C): whole phrases and the one under way (a hypothesis's bank)."""
        lengths = self.lengths[rows][:, None, :]  # (N, 1, M)
        return (progress.met * lengths).sum(dim=2) + progress.position

    def _expected(self, progress: Progress, rows: Tensor) -> Tensor:
        """The next token (N, C) of each hypothesis's phrase under way (meaningless when none)."""
        tokens = self.tokens[rows]  # (N, M, P)
        p = tokens.size(2)
        at = progress.current.clamp(min=0) * p + progress.position.clamp(max=p - 1)  # (N, C)
        return tokens.flatten(1).gather(1, at)

    def next_tokens(self, progress: Progress, rows: Tensor) -> tuple[Tensor, Tensor]:
        """The tokens (N, K, M) that would advance each hypothesis's constraints, and which of
        them are real (N, K, M) bool: the next of the phrase under way, else the first of each
        phrase not met."""
        lengths = self.lengths[rows]  # (N, M)
        m = lengths.size(1)
        under_way = progress.current >= 0  # (N, K)
        firsts = self.tokens[rows][:, None, :, 0].expand(-1, under_way.size(1), -1)  # (N, K, M)
        expected = self._expected(progress, rows)[:, :, None].expand(-1, -1, m)  # (N, K, M)
        tokens = torch.where(under_way[:, :, None], expected, firsts)
        own = torch.nn.functional.one_hot(progress.current.clamp(min=0), m).bool()  # (N, K, M)
        open_ = ~progress.met & (lengths > 0)[:, None, :]
        return tokens, torch.where(under_way[:, :, None], own, open_)

    def advance(self, progress: Progress, rows: Tensor, tokens: Tensor) -> Progress:
        """The progress (N, C, ...) of hypotheses with ``progress`` (N, C, ...) extended by
        ``tokens`` (N, C)."""
        lengths = self.lengths[rows]  # (N, M)
        m = lengths.size(1)
        current = progress.current.clamp(min=0)  # (N, C)
        follows = (progress.current >= 0) & (tokens == self._expected(progress, rows))  # (N, C)
        position = torch.where(follows, progress.position + 1, 0)
        completes = follows & (position == lengths.gather(1, current))  # (N, C)
        met = progress.met | (completes[:, :, None] & torch.nn.functional.one_hot(current, m).bool())
        current = torch.where(follows & ~completes, current, -1)
        position = torch.where(completes, 0, position)
        # a token that does not continue a phrase under way (or ends none) may begin one
        begins = (~follows)[:, :, None] & ~met & (lengths > 0)[:, None, :] & (
            self.tokens[rows][:, None, :, 0] == tokens[:, :, None])  # (N, C, M)
        first = begins.int().argmax(dim=2)  # (N, C): the first phrase it begins
        begun = begins.any(dim=2)
        single = begun & (lengths.gather(1, first) == 1)
        met = met | (single[:, :, None] & torch.nn.functional.one_hot(first, m).bool())
        under_way = begun & ~single
        return Progress(met, torch.where(under_way, first, current), torch.where(under_way, 1, position),
                        completes | single)

    def finishers(self, finishing: Tensor, banks: Tensor, rows: Tensor, pool_empty: Tensor) -> Tensor:
        """Of the candidates (N, C) that would finish (at the length limit, all of the first K),
        those that may: the ones that met every phrase; where a sentence has none and nothing
        finished yet (``pool_empty`` (N,)), the ones of its fullest bank, so that it still gets a
        translation, as close to its phrases as the search came."""
        complete = banks == self.lengths[rows].sum(dim=1, keepdim=True)  # (N, C)
        fallback = pool_empty & ~(finishing & complete).any(dim=1)  # (N,)
        fullest = banks.masked_fill(~finishing, -1).amax(dim=1, keepdim=True)  # (N, 1)
        return finishing & (complete | (fallback[:, None] & (banks == fullest)))

    def forbid_(self, log_probs: Tensor, progress: Progress, rows: Tensor, eos_id: int, *,
                within_prefix: Tensor | None = None) -> None:
        """Forbid EOS, in place in ``log_probs`` (N, K, V), to hypotheses with a phrase unmet;
        and the word tails to hypotheses that have just met a phrase (it stays a whole word),
        except in sentences still ``within_prefix`` (N,) bool, whose next token is the user's."""
        unmet = ~self.complete(progress, rows)  # (N, K)
        log_probs[..., eos_id].masked_fill_(unmet, -math.inf)
        if self.word_tails is not None:
            ended = progress.ended if within_prefix is None else progress.ended & ~within_prefix[:, None]
            log_probs.masked_fill_(ended[:, :, None] & self.word_tails, -math.inf)


WORD_START = "\u2581"  # SentencePiece's mark of a piece that begins a word


BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece's byte fallback


def word_tail_ids(pieces: Sequence[str]) -> list[int]:
    """The ids (indices into ``pieces``, a vocabulary's pieces in id order) of the pieces that
    continue a word: no word-start mark and a letter or digit first, or a byte-fallback piece of
    a letter, a digit or a multi-byte character (punctuation and special pieces such as
    ``<unk>`` may follow a word)."""
    def tail(piece: str) -> bool:
        byte = BYTE_PIECE.fullmatch(piece)
        if byte:
            value = int(byte.group(1), 16)
            return value >= 0x80 or chr(value).isalnum()
        return bool(piece) and not piece.startswith(WORD_START) and piece[0].isalnum()

    return [i for i, piece in enumerate(pieces) if tail(piece)]


def constrained_candidates(
    log_probs: Tensor, alive_log_probs: Tensor, constraints: Constraints, progress: Progress,
    rows: Tensor, *, count: int, chunk: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The candidates of each sentence: the ``count`` best extensions (as
    :func:`~transformer.decoding.ranking.top_candidates`, best first), then each live hypothesis
    extended by each token that advances its constraints, then by its own best token. Returns
    scores (N, C), beams (N, C) and tokens (N, C); a candidate that is not one (not a real
    constraint token, or already among the earlier ones) has score -inf."""
    n, k, _ = log_probs.shape
    scores, beams, tokens = top_candidates(log_probs, alive_log_probs, count, chunk=chunk)
    forced, real = constraints.next_tokens(progress, rows)  # (N, K, M)
    m = forced.size(2)
    forced_scores = log_probs.gather(2, forced) + alive_log_probs[:, :, None]  # (N, K, M)
    forced_scores = forced_scores.masked_fill(~real, -math.inf)
    own_token = argmax_rows(log_probs.view(n * k, -1), chunk).view(n, k)  # (N, K): in two rounds
    own_best = log_probs.gather(2, own_token[:, :, None]).squeeze(2)
    arange = torch.arange(k, device=log_probs.device)
    scores = torch.cat([scores, forced_scores.view(n, k * m), own_best + alive_log_probs], dim=1)
    beams = torch.cat([beams, arange.repeat_interleave(m).expand(n, -1), arange.expand(n, -1)], dim=1)
    tokens = torch.cat([tokens, forced.view(n, k * m), own_token], dim=1)
    key = beams * log_probs.size(2) + tokens  # (N, C): the same key is the same candidate
    same = (key[:, :, None] == key[:, None, :]) & (scores > -math.inf)[:, None, :]  # (N, C, C)
    earlier = torch.ones(same.shape[1:], dtype=torch.bool, device=same.device).tril(-1)
    repeated = (same & earlier).any(dim=2)  # (N, C): a candidate before it is the same
    return scores.masked_fill(repeated, -math.inf), beams, tokens


def allocate(scores: Tensor, banks: Tensor, *, beam_size: int, bank_count: int) -> tuple[Tensor, Tensor]:
    """Deal the beam across banks. ``scores`` (N, C) of candidates in bank ``banks`` (N, C)
    (tokens met, 0 to ``bank_count - 1``). Each candidate's place in the dealing order: its
    rank within its bank, times the banks, plus the fuller banks first. Returns a priority
    (N, C), higher first (-inf: not a candidate), and which candidates are among the first
    ``beam_size`` of the order (N, C) bool, what plain beam search's top K are."""
    n, c = scores.shape
    order = scores.argsort(dim=1, descending=True, stable=True)  # (N, C)
    sorted_banks = banks.gather(1, order)
    seen = torch.nn.functional.one_hot(sorted_banks, bank_count).cumsum(dim=1)  # (N, C, G)
    rank_sorted = seen.gather(2, sorted_banks[:, :, None]).squeeze(2) - 1  # (N, C)
    rank = torch.empty_like(rank_sorted).scatter_(1, order, rank_sorted)  # (N, C)
    place = (rank * bank_count + (bank_count - 1 - banks)).float()
    priority = (-place).masked_fill(scores == -math.inf, -math.inf)
    first = torch.zeros((n, c), dtype=torch.bool, device=scores.device)
    top = priority.topk(min(beam_size, c), dim=1).indices
    first.scatter_(1, top, True)
    return priority, first & (priority > -math.inf)


def dealt_candidates(
    log_probs: Tensor, alive_log_probs: Tensor, constraints: Constraints, progress: Progress,
    rows: Tensor, *, beam_size: int, chunk: int | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Progress, Tensor]:
    """One step's candidates (N, C) of the live hypotheses (``log_probs`` (N, K, V), EOS already
    blocked where a phrase is unmet, ``alive_log_probs`` (N, K), ``progress``) of sentences
    ``rows`` (N,), dealt across banks: their scores, beams, tokens, priority (higher first),
    which are the first ``beam_size`` (:func:`allocate`), each one's progress and bank."""
    scores, beams, tokens = constrained_candidates(log_probs, alive_log_probs, constraints, progress,
                                                   rows, count=2 * beam_size, chunk=chunk)
    moved = constraints.advance(progress.pick(beams), rows, tokens)  # (N, C, ...)
    banks = constraints.met_tokens(moved, rows)  # (N, C)
    priority, first = allocate(scores, banks, beam_size=beam_size, bank_count=constraints.banks)
    return scores, beams, tokens, priority, first, moved, banks
