"""Text in, text out: tokenize sentences, decode them in batches, detokenize, keep input order.

    translator = load_translator("runs/m30k", beam_size=4)     # transformer.inference.loader
    translator = Translator.from_loaded(load_model_dir("runs/m30k"), options=DecodeOptions())
    translator.translate(["A man rides a horse.", ""])   # -> [Translation(text=...), Translation("")]
    for t in translator.stream(sys.stdin_lines): ...    # lazily, chunk by chunk, in order
    translator.translate_ids([[17, 45, 9]])             # ids in, best ids out (validation, the demo)

Shapes: B sentences in a batch, S longest source in it (token ids).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torch import nn

from transformer.config.decoding import DecodeOptions
from transformer.data.padding import pad_rows
from transformer.decoding.beam import beam_search
from transformer.decoding.fast_decoder import decoder_for
from transformer.decoding.greedy import greedy_decode

if TYPE_CHECKING:
    from transformer.model_dir import LoadedModel, RunRecord, TextTokenizer

log = logging.getLogger(__name__)

Candidates = list[tuple[list[int], float | None]]  # (target ids, beam score or None), best first


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

    engine = "torch"  # what decodes (transformer.inference.engines has the others)

    def __init__(
        self,
        model: nn.Module,
        src_tokenizer: TextTokenizer | None,
        tgt_tokenizer: TextTokenizer | None,
        *,
        bos_id: int,
        eos_id: int,
        options: DecodeOptions | None = None,
        batch_size: int = 64,
        precision: str = "fp32",
        record: RunRecord | None = None,
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
        # the model directory's record (languages, the run's decoding limits); None for a bare model
        self.record = record

    @classmethod
    def from_loaded(cls, loaded: LoadedModel, *, options: DecodeOptions | None = None,
                    batch_size: int = 64, precision: str = "fp32") -> Translator:
        """A translator for a :class:`transformer.model_dir.LoadedModel`; ``options`` default to
        the paper's beam search within the run's length limits."""
        from transformer.data.tokenizer import BOS_ID, EOS_ID

        if loaded.tgt_tokenizer is None:
            raise ValueError("this model directory holds a classifier, not a translation model")
        return cls(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer, bos_id=BOS_ID,
                   eos_id=EOS_ID, options=options or loaded.record.decode_options(),
                   batch_size=batch_size, precision=precision, record=loaded.record)

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
