"""Text in, text out: tokenize sentences, decode them in batches, detokenize, keep input order.

    loaded = load_model_dir("runs/m30k")
    translator = Translator.from_loaded(loaded, options=DecodeOptions(beam_size=4))
    translator.translate(["A man rides a horse.", ""])   # -> [Translation(text=...), Translation("")]
    for t in translator.stream(sys.stdin_lines): ...    # lazily, chunk by chunk, in order
    translator.translate_ids([[17, 45, 9]])             # ids in, best ids out (validation, the demo)

Shapes: B sentences in a batch, S longest source in it (token ids).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torch import nn

from transformer.data.padding import pad_rows
from transformer.decoding.beam import beam_search
from transformer.decoding.fast_decoder import decoder_for
from transformer.decoding.greedy import greedy_decode

if TYPE_CHECKING:
    from transformer.data.tokenizer import Tokenizer
    from transformer.model_dir import LoadedModel

log = logging.getLogger(__name__)

Candidates = list[tuple[list[int], float | None]]  # (target ids, beam score or None), best first


@dataclass(frozen=True)
class DecodeOptions:
    """How to decode. ``beam_size=1`` is greedy decoding. The defaults are the paper's (section
    6.1: beam 4, length penalty 0.6); a translation is at most ``max_len_a * source tokens +
    max_len_b`` tokens (and never more than ``max_len`` or the model's positions)."""

    beam_size: int = 4
    length_penalty: float = 0.6
    nbest: int | None = None
    max_len_a: float | None = 1.5
    max_len_b: int = 10
    max_len: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.beam_size, bool) or not isinstance(self.beam_size, int) or self.beam_size < 1:
            raise ValueError(f"beam size must be a positive integer, got {self.beam_size!r}")
        if self.nbest is not None and not 1 <= self.nbest <= self.beam_size:
            raise ValueError(f"nbest must be between 1 and the beam size {self.beam_size}, got {self.nbest}")
        if not math.isfinite(self.length_penalty) or self.length_penalty < 0:
            raise ValueError(f"length penalty must be a non-negative number, got {self.length_penalty}")
        if self.max_len_a is not None and (not math.isfinite(self.max_len_a) or self.max_len_a < 0):
            raise ValueError(f"max_len_a must be a non-negative number, got {self.max_len_a}")
        if self.max_len is not None and self.max_len < 1:
            raise ValueError(f"max_len must be positive, got {self.max_len}")


@dataclass
class Translation:
    """One input sentence's result: the best translation, its beam score (None for greedy or an
    empty input) and, when n-best was asked for, every (translation, score) pair, best first."""

    text: str
    score: float | None = None
    nbest: list[tuple[str, float]] = field(default_factory=list)


def _one_line(text: str) -> str:
    """A translation must stay on one output line whatever pieces the model produced."""
    return " ".join(text.splitlines()) if ("\n" in text or "\r" in text) else text


class Translator:
    """Translates sentences with an encoder-decoder model and its tokenizers.

    ``batch_size`` sentences are decoded at once, grouped by source length so that little goes to
    padding; results always come back in input order. An empty (or blank) input gives an empty
    translation without running the model. Sources longer than the model's positions are cut to
    fit (and counted in ``truncated``). :meth:`translate_ids` works on token ids and needs no
    tokenizer.
    """

    def __init__(
        self,
        model: nn.Module,
        src_tokenizer: Tokenizer | None,
        tgt_tokenizer: Tokenizer | None,
        *,
        bos_id: int,
        eos_id: int,
        options: DecodeOptions | None = None,
        batch_size: int = 64,
        precision: str = "fp32",
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch size must be positive, got {batch_size}")
        self.model = model
        self.src_tokenizer = src_tokenizer
        self.tgt_tokenizer = tgt_tokenizer
        self.bos_id, self.eos_id = bos_id, eos_id
        self.options = options or DecodeOptions()
        self.batch_size = batch_size
        self.truncated = 0
        self.device = next(model.parameters()).device
        # the decoding fast path, weights packed once for every batch (None: not a Transformer)
        self.decoder = decoder_for(model, precision=precision)
        self.precision = precision
        self.progress = False  # a bar over the batches of a call that has several

    @classmethod
    def from_loaded(cls, loaded: LoadedModel, *, options: DecodeOptions | None = None,
                    batch_size: int = 64, precision: str = "fp32") -> Translator:
        """A translator for a :class:`transformer.model_dir.LoadedModel`."""
        from transformer.data.tokenizer import BOS_ID, EOS_ID

        if loaded.tgt_tokenizer is None:
            raise ValueError("this model directory holds a classifier, not a translation model")
        return cls(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer, bos_id=BOS_ID,
                   eos_id=EOS_ID, options=options, batch_size=batch_size, precision=precision)

    def translate(self, sentences: Sequence[str]) -> list[Translation]:
        """Translate ``sentences``; one :class:`Translation` per sentence, in the same order."""
        out: list[Translation | None] = [None] * len(sentences)
        todo: list[tuple[int, list[int]]] = []
        limit = self.model.config.max_len
        for i, sentence in enumerate(sentences):
            ids = self.src_tokenizer.encode(sentence.strip()) if sentence.strip() else []
            if not ids:
                out[i] = Translation("")
                continue
            if len(ids) > limit:
                self.truncated += 1
                ids = ids[:limit]
            todo.append((i, ids))
        for (i, _), candidates in zip(todo, self._candidates([ids for _, ids in todo]), strict=True):
            out[i] = self._translation(candidates)
        return out  # type: ignore[return-value]

    def translate_ids(self, sources: Sequence[Sequence[int]]) -> list[list[int]]:
        """The best target ids (without BOS/EOS) of each source id list, in input order; sources
        are cut to the model's positions."""
        limit = self.model.config.max_len
        candidates = self._candidates([list(ids)[:limit] for ids in sources])
        return [found[0][0] if found else [] for found in candidates]

    def stream(self, sentences: Iterable[str], *, chunk_size: int | None = None) -> Iterator[Translation]:
        """Translate an iterable lazily: ``chunk_size`` sentences (default ``batch_size``) are read,
        translated and yielded, in order, before the next are read (``chunk_size=1``: each sentence
        as soon as it arrives, for an interactive prompt)."""
        size = chunk_size or self.batch_size
        chunk: list[str] = []
        for sentence in sentences:
            chunk.append(sentence)
            if len(chunk) >= size:
                yield from self.translate(chunk)
                chunk = []
        if chunk:
            yield from self.translate(chunk)

    def _candidates(self, sources: list[list[int]]) -> list[Candidates]:
        """Decode id lists in batches of similar length (so little goes to padding), with the
        weights the translator's decoder packed once for all batches; results in input order."""
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        out: list[Candidates] = [[] for _ in sources]
        bar = None
        if self.progress and len(order) > self.batch_size:
            from tqdm import tqdm

            bar = tqdm(total=len(order), unit="sentence", desc="translating", leave=False,
                       dynamic_ncols=True)
        try:
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                found = self._decode([sources[i] for i in chunk])
                for i, candidates in zip(chunk, found, strict=True):
                    out[i] = candidates
                if bar is not None:
                    bar.update(len(chunk))
        finally:
            if bar is not None:
                bar.close()
        return out

    def _decode(self, sources: list[list[int]]) -> list[Candidates]:
        """Decode the id lists of one batch: greedy (one candidate, no score) or beam search."""
        src = pad_rows(sources, pad_id=self.model.config.pad_id).to(self.device)  # (B, S)
        opt = self.options
        kw = dict(bos_id=self.bos_id, eos_id=self.eos_id, max_len=opt.max_len,
                  max_len_a=opt.max_len_a, max_len_b=opt.max_len_b, decoder=self.decoder,
                  precision=self.precision)
        if opt.beam_size == 1 and opt.nbest is None:
            return [[(ids, None)] for ids in greedy_decode(self.model, src, **kw)]
        return beam_search(self.model, src, beam_size=opt.beam_size, nbest=opt.nbest or 1,  # type: ignore[return-value]
                           length_penalty=opt.length_penalty, **kw)

    def _translation(self, candidates: Candidates) -> Translation:
        """Detokenized candidates: the best as the translation, all of them when n-best was asked."""
        texts = [(_one_line(self.tgt_tokenizer.decode(ids)), score) for ids, score in candidates]
        best_text, best_score = texts[0] if texts else ("", None)
        return Translation(best_text, best_score, texts if self.options.nbest else [])  # type: ignore[arg-type]
