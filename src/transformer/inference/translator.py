"""Text in, text out: tokenize sentences, decode them in batches, detokenize, keep input order.

    translator = load_translator("runs/m30k", beam_size=4)     # transformer.inference.loader
    translator = Translator.from_loaded(load_model_dir("runs/m30k"), options=DecodeOptions())
    translator.translate(["A man rides a horse.", ""])   # -> [Translation(text=...), Translation("")]
    for t in translator.stream(sys.stdin_lines): ...    # lazily, chunk by chunk, in order
    translator.translate_ids([[17, 45, 9]])             # ids in, best ids out (validation, the demo)
    translator.translate(["A man rides a horse."], prefixes=["Ein Mann"])   # forced starts
    translator.translate(["A man rides a horse."], constraints=[["Pferd"]])  # terminology
    translator.translate(["A man rides a horse."], options=DecodeOptions(beam_size=1))  # this call's

A built translator is never changed: how to decode (the options), the source tag, whether the
log-probabilities are wanted and a progress bar are given per call, as CTranslate2's
``translate_batch(source, **options)`` takes them; the translator's ``options`` are the default
of a call that gives none.

Every translation carries the model's log-probability of its decoded tokens (after any target
prefix, EOS included) and their count (:class:`~transformer.decoding.hypothesis.Hypothesis`).

Shapes: B sentences in a batch, S longest source in it (token ids).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from transformer.config.decoding import DecodeOptions
from transformer.decoding.hypothesis import Hypothesis
from transformer.errors import InputError

# PyTorch and our search are imported where ours decodes: a translator of another engine
# (transformer.inference.engines) tokenizes, orders and detokenizes without them
if TYPE_CHECKING:
    import torch
    from torch import nn

    from transformer.config import ModelConfig
    from transformer.model_dir import LoadedModel, RunRecord, TextTokenizer

log = logging.getLogger(__name__)


@dataclass
class Translation:
    """One input sentence's result: the best translation, its score (beam search's; a sample's
    log-probability; None for greedy decoding or an empty input) and, when n-best was asked for,
    every (translation, score) pair, best first. ``log_prob``: the model's log-probability of the
    tokens it decoded (after any target prefix, EOS included; None for an empty input),
    ``tokens``: how many; ``nbest_log_probs``: (log-probability, tokens) of each n-best entry."""

    text: str
    score: float | None = None
    nbest: list[tuple[str, float]] = field(default_factory=list)
    log_prob: float | None = None
    tokens: int = 0
    nbest_log_probs: list[tuple[float, int]] = field(default_factory=list)

    @property
    def log_prob_per_token(self) -> float | None:
        """``log_prob / tokens``: the average log-probability of a decoded token (None without)."""
        return None if self.log_prob is None or not self.tokens else self.log_prob / self.tokens


def _one_line(text: str) -> str:
    """A translation must stay on one output line whatever pieces the model produced."""
    return " ".join(text.splitlines()) if ("\n" in text or "\r" in text) else text


def token_streamable(options: DecodeOptions) -> bool:
    """Whether a sentence decoded under ``options`` has a prefix that stays as it is decoded,
    so that its tokens can be shown as they come: greedy decoding, or one sample."""
    if options.sampling:
        return (options.nbest or 1) == 1
    return options.beam_size == 1 and options.nbest is None


class Translator:
    """Translates sentences with an encoder-decoder model and its tokenizers.

    ``batch_size`` sentences are decoded at once, grouped by source length so that little goes to
    padding; results always come back in input order. An empty (or blank) input gives an empty
    translation without running the model. Sources longer than the model's positions are cut to
    fit (and counted in ``truncated``). :meth:`translate_ids` works on token ids and needs no
    tokenizer.
    """

    engine = "torch"  # what decodes (transformer.inference.engines has the others)
    # an ensemble's members, their weights files (transformer.inference.ensemble); empty: one model
    members: tuple[str, ...] = ()

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
        from transformer.decoding.fast_decoder import decoder_for

        self._setup(model.config, next(model.parameters()).device, src_tokenizer, tgt_tokenizer,
                    bos_id=bos_id, eos_id=eos_id, options=options, batch_size=batch_size,
                    precision=precision, record=record)
        self.model = model
        # the decoding fast path, weights packed once for every batch (None: not a Transformer)
        self.decoder = decoder_for(model, precision=precision)

    def _setup(self, config: ModelConfig, device: torch.device | str, src_tokenizer: TextTokenizer | None,
               tgt_tokenizer: TextTokenizer | None, *, bos_id: int, eos_id: int,
               options: DecodeOptions | None, batch_size: int, precision: str,
               record: RunRecord | None) -> None:
        """What every engine's translator holds besides the model."""
        if batch_size < 1:
            raise ValueError(f"batch size must be positive, got {batch_size}")
        self.config = config  # the model's sizes, positions and special ids
        self.device = device
        self.src_tokenizer = src_tokenizer
        self.tgt_tokenizer = tgt_tokenizer
        self.bos_id, self.eos_id = bos_id, eos_id
        self.options = options or DecodeOptions()
        self.batch_size = batch_size
        self.truncated = 0
        self._tails: list[int] | None = None  # the target pieces that continue a word, read once
        self._forbidden: dict[tuple[str, ...], list[list[int]]] = {}  # forbidden_ids, per phrase set
        self.precision = precision
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

    def translate(self, sentences: Sequence[str], *, options: DecodeOptions | None = None,
                  prefixes: Sequence[str | None] | None = None,
                  keys: Sequence[object] | None = None,
                  constraints: Sequence[Sequence[str]] | None = None,
                  source_prefix: Sequence[int] = (), log_probs: bool = True,
                  progress: bool = False,
                  on_token: Callable[[int], None] | None = None) -> list[Translation]:
        """Translate ``sentences``; one :class:`Translation` per sentence, in the same order.

        ``options``: how to decode this call (None: the translator's ``options``).
        ``source_prefix``: ids put before every source sentence (a tag:
        :mod:`transformer.inference.tags`). ``log_probs``: False when only the texts are wanted
        (greedy decoding then skips its log-softmax a step, and a greedy translation's
        ``log_prob`` is None). ``progress``: a bar over the batches of a call that has several.
        ``prefixes``: one target prefix per sentence ("": none; None, or no list: the options'
        ``target_prefix``); each translation starts with its prefix as the target tokenizer
        splits it. ``keys``: what identifies each sentence's random draws when
        sampling (default: its place in ``sentences``; the same key and seed give the same
        samples in any batch). ``constraints``: target phrases per sentence ([]: none) that its
        translation must contain, in any order, as the target tokenizer splits each phrase
        (lexically constrained beam search, :mod:`transformer.decoding.constraints`; not with
        sampling). InputError for a phrase the target tokenizer cannot encode. ``on_token``: called
        with each target id as it is decoded (a forced prefix's included, EOS last), for one
        sentence decoded greedily or sampled once (ValueError otherwise: beam search has no
        prefix that stays): :func:`transformer.inference.streaming.stream_translation`'s tokens."""
        if on_token is not None and (len(sentences) != 1 or (constraints is not None and any(constraints))
                                     or not token_streamable(self.options if options is None else options)):
            raise ValueError("on_token: one sentence, decoded greedily or sampled once, without "
                             "constraints")
        for name, given in (("prefixes", prefixes), ("keys", keys), ("constraints", constraints)):
            if given is not None and len(given) != len(sentences):
                raise ValueError(f"{name}: {len(given)} given for {len(sentences)} sentences")
        opt = self.options if options is None else options
        if constraints is not None and any(constraints) and opt.sampling:
            raise InputError("constraints need beam search (or greedy decoding), not sampling")
        out: list[Translation | None] = [None] * len(sentences)
        todo: list[tuple[int, list[int], list[int], list[list[int]]]] = []  # (place, source, prefix, phrases)
        limit = self.config.max_len
        for i, sentence in enumerate(sentences):
            ids = self.src_tokenizer.encode(sentence.strip()) if sentence.strip() else []
            if not ids:
                out[i] = Translation("")
                continue
            tag = list(source_prefix)
            if len(ids) + len(tag) > limit:
                self.truncated += 1
                ids = ids[:limit - len(tag)]
            ids = tag + ids if tag else ids
            own = None if prefixes is None else prefixes[i]
            phrases = [] if constraints is None else [self.phrase_ids(p) for p in constraints[i]]
            if sum(map(len, phrases)) >= limit:
                raise InputError(f"constraints of sentence {i + 1}: {sum(map(len, phrases))} tokens "
                                 f"in all; this model decodes at most {limit - 1}")
            todo.append((i, ids, self.prefix_ids(opt.target_prefix if own is None else own),
                         phrases))
        found = self._candidates([t[1] for t in todo], opt, prefixes=[t[2] for t in todo],
                                 log_probs=log_probs, progress=progress,
                                 keys=[t[0] if keys is None else keys[t[0]] for t in todo],
                                 constraints=[t[3] for t in todo] if constraints is not None else None,
                                 on_token=on_token)
        for (i, *_), candidates in zip(todo, found, strict=True):
            out[i] = self._translation(candidates, opt, log_probs=log_probs)
        return out  # type: ignore[return-value]

    def phrase_ids(self, phrase: str) -> list[int]:
        """A constraint phrase as the target tokenizer splits it; InputError when it is blank,
        when the tokenizer does not know one of its pieces, or when it leaves the model no
        position."""
        from transformer.data.tokenizer import UNK_ID

        shown = repr(phrase if len(phrase) <= 40 else phrase[:37] + "...")
        ids = self.tgt_tokenizer.encode(phrase.strip()) if phrase.strip() else []
        if not ids:
            raise InputError(f"constraint {shown} is empty")
        if UNK_ID in ids:  # the model could only write it as ⁇
            raise InputError(f"constraint {shown}: the target vocabulary lacks some of its characters")
        if len(ids) >= int(self.config.max_len):
            raise InputError(f"constraint {shown} is {len(ids)} tokens; this model decodes at most "
                             f"{int(self.config.max_len) - 1}")
        return ids

    def prefix_ids(self, prefix: str | None) -> list[int]:
        """A target prefix as the target tokenizer splits it ([] for None or blank); InputError
        when it leaves the model no position to decode."""
        if not prefix or not prefix.strip():
            return []
        ids = self.tgt_tokenizer.encode(prefix.strip())
        most = int(self.config.max_len) - 1
        if len(ids) > most:
            shown = prefix if len(prefix) <= 40 else prefix[:37] + "..."
            raise InputError(f"target prefix {shown!r} is {len(ids)} tokens; this model decodes "
                             f"at most {most} after a prefix")
        return ids

    def forbidden_ids(self, phrases: Sequence[str]) -> list[list[int]]:
        """The options' ``forbid`` phrases as the target tokenizer encodes each (a phrase is
        forbidden as those tokens, wherever they stand), read once per set of phrases."""
        key = tuple(phrases)
        if key not in self._forbidden:
            self._forbidden[key] = [self.tgt_tokenizer.encode(p.strip()) for p in key]
        return self._forbidden[key]

    def translate_ids(self, sources: Sequence[Sequence[int]], *,
                      options: DecodeOptions | None = None) -> list[list[int]]:
        """The best target ids (without BOS/EOS) of each source id list, in input order; sources
        are cut to the model's positions."""
        limit = self.config.max_len
        candidates = self._candidates([list(ids)[:limit] for ids in sources],
                                      self.options if options is None else options, log_probs=False)
        return [found[0].ids if found else [] for found in candidates]

    def stream(self, sentences: Iterable[str], *, chunk_size: int | None = None,
               **call: Any) -> Iterator[Translation]:
        """Translate an iterable lazily: ``chunk_size`` sentences (default ``batch_size``) are read,
        translated and yielded, in order, before the next are read (``chunk_size=1``: each sentence
        as soon as it arrives, for an interactive prompt); ``call``: :meth:`translate`'s
        ``options``, ``source_prefix``, ``log_probs``."""
        size = chunk_size or self.batch_size
        chunk: list[str] = []
        for sentence in sentences:
            chunk.append(sentence)
            if len(chunk) >= size:
                yield from self.translate(chunk, **call)
                chunk = []
        if chunk:
            yield from self.translate(chunk, **call)

    def _candidates(self, sources: list[list[int]], opt: DecodeOptions, *,
                    prefixes: list[list[int]] | None = None,
                    keys: list[object] | None = None, log_probs: bool = True,
                    constraints: list[list[list[int]]] | None = None,
                    progress: bool = False,
                    on_token: Callable[[int], None] | None = None) -> list[list[Hypothesis]]:
        """Decode id lists in batches of similar length (so little goes to padding), with the
        weights the translator's decoder packed once for all batches; results in input order.
        ``prefixes``: target ids each output starts with; ``keys``: each source's key for its
        random draws (default: its place); ``log_probs``: False when only the ids are wanted
        (greedy decoding then skips a log-sum-exp a step); ``constraints``: target phrases per
        source."""
        prefixes = prefixes if prefixes is not None else [[] for _ in sources]
        keys = keys if keys is not None else list(range(len(sources)))
        seed = opt.seed if opt.seed is not None else secrets.randbelow(2**62)
        forbid = self.forbidden_ids(opt.forbid) if opt.forbid else None
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        out: list[list[Hypothesis]] = [[] for _ in sources]
        size = self._call_size(opt, log_probs=log_probs, constraints=constraints, on_token=on_token)
        bar = None
        if progress and len(order) > size:
            from tqdm import tqdm

            bar = tqdm(total=len(order), unit="sentence", desc="translating", leave=False,
                       dynamic_ncols=True)
        try:
            for start in range(0, len(order), size):
                chunk = order[start : start + size]
                phrases = None if constraints is None else [constraints[i] for i in chunk]
                found = self._decode([sources[i] for i in chunk], opt, prefixes=[prefixes[i] for i in chunk],
                                     keys=[keys[i] for i in chunk], seed=seed, log_probs=log_probs,
                                     forbid=forbid,
                                     on_token=on_token,
                                     **({"constraints": phrases} if phrases and any(phrases) else {}))
                for i, candidates in zip(chunk, found, strict=True):
                    out[i] = candidates
                if bar is not None:
                    bar.update(len(chunk))
        finally:
            if bar is not None:
                bar.close()
        return out

    def _call_size(self, opt: DecodeOptions, *, log_probs: bool,
                   constraints: list[list[list[int]]] | None,
                   on_token: Callable[[int], None] | None) -> int:
        """How many sentences (sorted by length) one :meth:`_decode` call is given: ours decodes
        a batch a call."""
        return self.batch_size

    def _decode(self, sources: list[list[int]], opt: DecodeOptions, *, prefixes: list[list[int]],
                keys: list[object], seed: int, log_probs: bool = True,
                forbid: list[list[int]] | None = None,
                constraints: list[list[list[int]]] | None = None,
                on_token: Callable[[int], None] | None = None) -> list[list[Hypothesis]]:
        """Decode the id lists of one batch under ``opt``: greedy, sampled or beam search, each
        source's hypotheses best first; with ``constraints`` (phrases per source), constrained
        beam search (of the options' beam size, 1 included); ``forbid``: token sequences no
        hypothesis holds; ``on_token``: told each id of a one-source greedy or sampled batch."""
        from transformer.data.padding import pad_rows
        from transformer.decoding.beam import beam_search
        from transformer.decoding.greedy import greedy_decode, sample_decode

        src = pad_rows(sources, pad_id=self.config.pad_id).to(self.device)  # (B, S)
        kw = dict(bos_id=self.bos_id, eos_id=self.eos_id, options=opt, decoder=self.decoder,
                  precision=self.precision, prefixes=prefixes if any(prefixes) else None,
                  forbid=forbid)
        if opt.sampling:
            return sample_decode(self.model, src, seed=seed, keys=keys, on_token=on_token, **kw)
        if opt.beam_size == 1 and opt.nbest is None and constraints is None:
            if not log_probs:
                return [[Hypothesis(ids, 0.0, 0.0, 0)]  # type: ignore[union-attr]
                        for ids in greedy_decode(self.model, src, on_token=on_token, **kw)]
            return [[found] for found in greedy_decode(self.model, src, hypotheses=True,
                                                       on_token=on_token, **kw)]
        return beam_search(self.model, src, hypotheses=True, constraints=constraints,  # type: ignore[return-value]
                           word_tails=self._word_tails() if constraints is not None else None, **kw)

    def _word_tails(self) -> list[int]:
        """The target pieces that continue a word (a constraint met is never extended by one),
        read from the tokenizer once."""
        if self._tails is None:
            from transformer.decoding.constraints import word_tail_ids

            tok = self.tgt_tokenizer
            self._tails = word_tail_ids([tok.id_to_piece(i) for i in range(tok.vocab_size)])
        return self._tails

    def _translation(self, candidates: list[Hypothesis], opt: DecodeOptions, *,
                     log_probs: bool) -> Translation:
        """Detokenized candidates: the best as the translation, all of them when n-best was
        asked. Greedy decoding has no score of its own (only its log-probability)."""
        texts = [_one_line(self.tgt_tokenizer.decode(found.ids)) for found in candidates]
        if not candidates:
            return Translation("")
        greedy = not opt.sampling and opt.beam_size == 1 and opt.nbest is None
        best = candidates[0]
        unscored = greedy and not log_probs  # (greedy only: searches need the scores)
        return Translation(
            texts[0], None if greedy else best.score,
            [(text, found.score) for text, found in zip(texts, candidates, strict=True)] if opt.nbest else [],
            log_prob=None if unscored else best.log_prob, tokens=0 if unscored else best.tokens,
            nbest_log_probs=[(found.log_prob, found.tokens) for found in candidates] if opt.nbest else [])
