"""Word alignments from cross-attention: which source word each target word was translated from,
as Pharaoh pairs ``i-j`` (0-based source word i, target word j), the format fairseq
(``--print-alignment``) and Marian (``--alignment``) print.

    pairs = align_texts(model, src_tok, tgt_tok, ["forty-two dogs"], ["zweiundvierzig Hunde"])
    pharaoh(pairs[0])    # -> "0-0 1-1"

Words are the whitespace-separated tokens of the source and of the (detokenized) translation. The
translation is re-encoded by the target tokenizer and read once, teacher-forced
(``model(src, tgt_in, return_attention=True)``), so the search is untouched and any translation
can be aligned, a reference as well as the model's own.

The rule (:data:`DEFAULT_RULE`, chosen by measuring every layer and head with
``benchmarks/alignment.py``): take the cross-attention of one decoder layer, averaged over its
heads; the row of target piece t is the decoder position that predicts it (``row="output"``) or
the one that reads it as input, one later (``row="input"``). A target word's row is the sum of its
pieces' rows, a source word's column the sum of its pieces' columns (a piece that straddles two
words is shared by its characters), and each target word is aligned to the source word of
largest summed attention: exactly one pair per target word that has a piece.

Pieces are placed in a text by decoding prefixes of their ids and counting the non-space
characters each adds, so any tokenizer works (SentencePiece byte pieces, an imported vocabulary);
a piece of whitespace only, or a byte that does not finish a character, goes with the character
that follows it, and a piece the vocabulary lacks counts as the one character it is shown as.

Shapes: L decoder layers, H heads, P target pieces (T = P + 1 decoder positions with BOS or EOS),
S source pieces, J target words, I source words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from transformer.data.padding import pad_rows
from transformer.data.tokenizer import BOS_ID
from transformer.inference.forced import forced_batches

if TYPE_CHECKING:
    from transformer.model_dir import TextTokenizer

ROWS = ("output", "input")
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
Span = tuple[int, int]  # [start, end) in non-space characters of a text
Pairs = list[tuple[int, int]]  # (source word i, target word j), sorted by j


@dataclass(frozen=True)
class AlignmentRule:
    """Which cross-attention aligns: decoder ``layer`` (from 1; -1 the last), ``head`` (from 1;
    None: the average over heads) and ``row`` (``"output"``: the position that predicts a piece;
    ``"input"``: the one that reads it). ValueError for a value out of range."""

    layer: int = -1
    head: int | None = None
    row: str = "output"

    def __post_init__(self) -> None:
        if self.layer == 0:
            raise ValueError("layer is counted from 1 (or from the end: -1 is the last)")
        if self.head is not None and self.head < 1:
            raise ValueError(f"head is counted from 1, got {self.head}")
        if self.row not in ROWS:
            raise ValueError(f"row must be one of {ROWS}, got {self.row!r}")

    def pick(self, cross: Tensor) -> Tensor:
        """(L, H, T, S) cross-attention of one pair -> the (P, S) rows this rule aligns with."""
        layers, heads = cross.shape[:2]
        if not -layers <= self.layer <= layers:
            raise ValueError(f"layer {self.layer} is outside the decoder's {layers} layers")
        if self.head is not None and self.head > heads:
            raise ValueError(f"head {self.head} is outside the layer's {heads} heads")
        one = cross[self.layer - 1 if self.layer > 0 else self.layer]  # (H, T, S)
        one = one.mean(dim=0) if self.head is None else one[self.head - 1]  # (T, S)
        return one[:-1] if self.row == "output" else one[1:]  # (P, S)


# measured on the demo task and on Multi30k (benchmarks/alignment.py; docs/how-to/score-and-align.md)
DEFAULT_RULE = AlignmentRule(layer=-1, head=None, row="output")


def word_spans(text: str) -> list[Span]:
    """The whitespace-separated words of ``text`` as [start, end) in non-space characters."""
    spans, count = [], 0
    for word in re.findall(r"\S+", text):
        spans.append((count, count + len(word)))
        count += len(word)
    return spans


def _solid(text: str) -> int:
    return len("".join(text.split()))  # the non-space characters (str.split: Unicode spaces)


def piece_spans(tokenizer: Any, ids: Sequence[int]) -> list[Span]:
    """Where each piece of ``ids`` lies in ``tokenizer.decode(ids)``, in non-space characters.

    A piece that adds no character of its own, whitespace only (SentencePiece's lone ``▁``) or a
    byte of a character that a later byte completes, is placed on the next character: the one
    it begins. Read from the pieces' own characters where they add up to the text's (plain
    SentencePiece pieces), else by decoding every prefix (:func:`spans_by_prefixes`); both give
    the same spans."""
    return _additive_spans(tokenizer, ids) or spans_by_prefixes(tokenizer, ids)


def _additive_spans(tokenizer: Any, ids: Sequence[int]) -> list[Span] | None:
    """The spans from each piece's own non-space characters (``▁`` a space); None where a piece
    is a byte, special or unknown one (``<...>``), or where the counts do not add up to the
    decoded text's."""
    if not ids or not hasattr(tokenizer, "id_to_piece"):
        return None
    counts = []
    pending = b""  # bytes of a character that later byte pieces finish
    for i in ids:
        piece = tokenizer.id_to_piece(i)
        byte = _BYTE_PIECE.fullmatch(piece)
        if byte:  # counted when its character is complete, as a decoded prefix counts it
            pending += bytes([int(byte.group(1), 16)])
            try:
                counts.append(_solid(pending.decode("utf-8")))
                pending = b""
            except UnicodeDecodeError:
                if len(pending) >= 4:
                    return None
                counts.append(0)
            continue
        if pending or (len(piece) > 2 and piece.startswith("<") and piece.endswith(">")):
            return None
        counts.append(_solid(piece.replace("\u2581", " ")))
    if pending or sum(counts) != _solid(tokenizer.decode(list(ids))):
        return None
    spans, last = [], 0
    for count in counts:
        spans.append((last, last + count) if count else (last, last + 1))
        last += count
    return spans


def spans_by_prefixes(tokenizer: Any, ids: Sequence[int]) -> list[Span]:
    """:func:`piece_spans` for any tokenizer: each piece ends where the decoded prefix that ends
    with it ends (one decode per piece)."""
    total = _solid(tokenizer.decode(list(ids)))
    spans, last = [], 0
    for k in range(1, len(ids) + 1):
        # an unfinished character decodes as U+FFFD, one per byte so far: not a character yet
        end = min(max(_solid(tokenizer.decode(list(ids[:k])).rstrip("\ufffd")), last), total)
        spans.append((last, end) if end > last else (last, last + 1))
        last = end
    return spans


def membership(pieces: Sequence[Span], words: Sequence[Span]) -> Tensor:
    """(pieces, words) share of each piece's characters that lie in each word: a row sums to 1
    for a piece inside words, less where it covers characters of no word. ``pieces`` and
    ``words`` run left to right (as :func:`piece_spans` and :func:`word_spans` give them)."""
    rows = [[0.0] * len(words) for _ in pieces]
    first = 0  # the first word that ends after the current piece starts
    for p, (a, b) in enumerate(pieces):
        while first < len(words) and words[first][1] <= a:
            first += 1
        w = first
        while w < len(words) and words[w][0] < b:
            c, d = words[w]
            if min(b, d) > max(a, c):
                rows[p][w] = (min(b, d) - max(a, c)) / (b - a)
            w += 1
    return torch.tensor(rows, dtype=torch.float32).reshape(len(pieces), len(words))


def best_pairs(scores: Tensor) -> Pairs:
    """(J, I) word-to-word attention -> one (i, j) per target word with any attention: the source
    word of the largest score (the first on a tie)."""
    if scores.numel() == 0:
        return []
    best = scores.argmax(dim=1)  # (J,)
    return [(int(best[j]), j) for j in range(scores.size(0)) if float(scores[j].sum()) > 0]


@torch.no_grad()
def cross_attention(model: nn.Module, pairs: Sequence[tuple[Sequence[int], Sequence[int]]], *,
                    max_tokens: int = 4096, bos_id: int = BOS_ID,
                    layer: int | None = None) -> list[Tensor]:
    """Teacher-forced cross-attention of ``(source ids, target ids)`` pairs (no BOS/EOS; both must
    fit the model's positions), batched within ``max_tokens`` padded positions: per pair, in input
    order, an (L, H, T, S) float32 tensor, T = target pieces + 1 (row t predicts piece t, the
    last row EOS). ``layer`` (0-based): that decoder layer's only, L = 1, and the layers above it
    are not run."""
    limit = int(model.config.max_len)
    pad_id = int(model.config.pad_id)
    items = [(list(s)[:limit], list(t)[: limit - 1]) for s, t in pairs]
    out: list[Tensor | None] = [None] * len(items)
    if not items:
        return []
    with forced_batches(model, items, max_tokens=max(max_tokens, limit + 1)) as (device, sampler):
        for indices in sampler:
            src = pad_rows([items[i][0] for i in indices], pad_id=pad_id).to(device)  # (B, S)
            tgt_in = pad_rows([[bos_id, *items[i][1]] for i in indices],
                              pad_id=pad_id).to(device)  # (B, T)
            cross = _cross_weights(model, src, tgt_in, layer=layer)
            stacked = torch.stack(cross, dim=1).float().cpu()  # (B, L, H, T, S)
            for row, i in enumerate(indices):
                s, t = len(items[i][0]), len(items[i][1]) + 1
                out[i] = stacked[row, :, :, :t, :s]  # (L, H, T, S)
    return out  # type: ignore[return-value]


def _cross_weights(model: nn.Module, src: Tensor, tgt_in: Tensor, *,
                   layer: int | None = None) -> list[Tensor]:
    """Per decoder layer (or of ``layer`` only, 0-based), the (B, H, T, S) cross-attention of a
    teacher-forced pass: our Transformer's encoder and decoder layers run as its forward runs
    them, without the output projection (its (B, T, V) logits are not needed here) and without
    the layers above ``layer``; any other model through its forward."""
    if not all(hasattr(model, name) for name in ("encode", "tgt_embed", "decoder", "config")):
        cross = model(src, tgt_in, return_attention=True).attention.cross
        return list(cross) if layer is None else [cross[layer]]
    from transformer.model.masks import padding_mask, subsequent_mask

    pad_id = int(model.config.pad_id)
    memory = model.encode(src)  # (B, S, D)
    self_mask = subsequent_mask(tgt_in.size(1), device=tgt_in.device) & padding_mask(tgt_in, pad_id)
    memory_mask = padding_mask(src, pad_id)  # (B, 1, 1, S)
    x = model.tgt_embed(tgt_in)  # (B, T, D)
    out = []
    for k, one in enumerate(model.decoder.layers):
        wanted = layer is None or k == layer
        x, _, cross = one(x, memory, self_mask=self_mask, memory_mask=memory_mask,
                          need_weights=wanted)
        if wanted:
            out.append(cross)
        if k == layer:
            break
    return out


def word_pairs(cross: Tensor, src_members: Tensor, tgt_members: Tensor, *,
               rule: AlignmentRule = DEFAULT_RULE) -> Pairs:
    """One pair's (L, H, T, S) cross-attention and its pieces' word shares, (S, I) source and
    (P, J) target -> the (i, j) pairs of ``rule``."""
    rows = rule.pick(cross)  # (P, S)
    return best_pairs(tgt_members.T @ rows @ src_members)  # (J, I)


def align_texts(model: nn.Module, src_tokenizer: TextTokenizer, tgt_tokenizer: TextTokenizer,
                sources: Sequence[str], targets: Sequence[str], *,
                rule: AlignmentRule = DEFAULT_RULE, max_tokens: int = 4096) -> list[Pairs]:
    """Word alignments of each ``targets[i]`` with ``sources[i]`` (both stripped), by ``rule``;
    an empty side gives no pairs. Sources are cut to the model's positions as ``translate`` cuts
    them (words past the cut get no pair), and so are targets."""
    limit = int(model.config.max_len)
    src_ids = [src_tokenizer.encode(s.strip())[:limit] if s.strip() else [] for s in sources]
    tgt_ids = [tgt_tokenizer.encode(t.strip())[: limit - 1] if t.strip() else [] for t in targets]
    todo = [i for i in range(len(src_ids)) if src_ids[i] and tgt_ids[i]]
    layers = int(model.config.num_decoder_layers)
    rule.pick(torch.zeros(layers, int(model.config.num_heads), 1, 1))  # refused before any work
    only = rule.layer - 1 if rule.layer > 0 else layers + rule.layer  # 0-based
    maps = cross_attention(model, [(src_ids[i], tgt_ids[i]) for i in todo], max_tokens=max_tokens,
                           layer=only)
    one_layer = AlignmentRule(layer=1, head=rule.head, row=rule.row)  # the maps hold only it
    out: list[Pairs] = [[] for _ in sources]
    for i, cross in zip(todo, maps, strict=True):
        src_members = membership(piece_spans(src_tokenizer, src_ids[i]), word_spans(sources[i]))
        tgt_members = membership(piece_spans(tgt_tokenizer, tgt_ids[i]), word_spans(targets[i]))
        out[i] = word_pairs(cross, src_members, tgt_members, rule=one_layer)
    return out


def pharaoh(pairs: Pairs) -> str:
    """Pairs as Pharaoh text: ``"0-0 2-1 1-2"`` (source-target, 0-based, space-separated)."""
    return " ".join(f"{i}-{j}" for i, j in pairs)


def _owner(spans: Sequence[Span]) -> list[int]:
    """Word index of each non-space character of a text whose words are ``spans``."""
    return [w for w, (a, b) in enumerate(spans) for _ in range(a, b)]


def line_pairs(source: str, translation: str, parts: Sequence[tuple[str, str, Pairs]]) -> Pairs:
    """A line's pairs from its sentences' pairs: ``parts`` are each sentence's (source text,
    translation text, pairs), in order, and the line is their concatenation up to whitespace (as
    :func:`~transformer.inference.lines.translate_lines` splits and joins it), so a sentence's
    word is found in the line by its first non-space character."""
    src_owner, tgt_owner = _owner(word_spans(source)), _owner(word_spans(translation))
    out: set[tuple[int, int]] = set()
    src_at = tgt_at = 0
    for src_text, tgt_text, pairs in parts:
        src_words, tgt_words = word_spans(src_text), word_spans(tgt_text)
        for i, j in pairs:
            a, c = src_at + src_words[i][0], tgt_at + tgt_words[j][0]
            if a < len(src_owner) and c < len(tgt_owner):
                out.add((src_owner[a], tgt_owner[c]))
        src_at, tgt_at = src_at + _solid(src_text), tgt_at + _solid(tgt_text)
    return sorted(out, key=lambda p: (p[1], p[0]))
