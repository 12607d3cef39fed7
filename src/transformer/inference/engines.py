"""The engines a translator decodes with: ours (``torch``: :class:`Translator`) and CTranslate2
(:class:`CTranslate2Translator`), chosen once by :func:`translator_with_engine` (what the loader's
``engine=`` and ``--engine`` reach).

    translator = load_translator("runs/m30k", engine="ctranslate2", precision="int8")
    translator.engine                  # "ctranslate2"
    translator.translate(["A man rides a horse."])

CTranslate2 decodes the run converted on first use into ``RUN_DIR/.cache/ctranslate2-<precision>/``
(:func:`transformer.convert.ctranslate2.cached_ctranslate2`), with the same search as ours: the
same length limit per sentence; beam search's hypotheses ranked by the GNMT length penalty (its
beam, unpenalised, returns the K best and they are ranked here: CTranslate2's own penalty divides
by ``length ** alpha``, which ranks differently); a sentence for which it produces PAD (which
ours never does) decoded again by ours. Our copy of the model is read only when something runs
on ours. A decoding option
it is not given (a :class:`~transformer.config.decoding.DecodeOptions` field this module does not
map, set to other than its default) runs on ours, with one log line saying so. ``auto`` is
:func:`transformer.inference.engine_choice.auto_engine`. CTranslate2 is optional (the ``convert``
extra); without it ``auto`` is ours and ``ctranslate2`` is refused with one line saying how to
install it.

Shapes: B sentences in a batch.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from transformer.config.choices import ENGINES
from transformer.config.decoding import DecodeOptions, length_limit
from transformer.decoding.hypothesis import Hypothesis
from transformer.errors import InputError
from transformer.inference.engine_choice import CT2_COMPUTE_TYPES, CTRANSLATE2, TORCH, auto_engine
from transformer.inference.translator import Translator

if TYPE_CHECKING:
    import torch

    from transformer.model_dir import LoadedModel

log = logging.getLogger(__name__)

INSTALL = "CTranslate2 is not installed: pip install 'transformer[convert]' (or pip install ctranslate2)"
# the DecodeOptions fields CTranslate2 is given in every search; any other field set away from its
# default runs on ours (sampling: our draws follow each sentence's key and seed, CTranslate2's
# cannot; alignments come from our model's cross-attention)
MAPPED_OPTIONS = frozenset({"beam_size", "length_penalty", "nbest", "max_len_a", "max_len_b", "max_len",
                            "target_prefix"})
# the fields CTranslate2 is given in greedy searches whose log-probabilities are not wanted: it
# renormalises after its logits processors, where ours (as Hugging Face's) keeps the model's own
# log-probabilities and ranks beams by them, so its beams and its scores differ from ours there
GREEDY_TEXT_OPTIONS = frozenset({"repetition_penalty", "no_repeat_ngram", "min_length", "forbid"})
# batches of ``batch_size`` sentences in one CTranslate2 call (a file's window is 2,048 lines: two
# calls of 16 batches each at the default batch size)
CALL_BATCHES = 16


def check_engine(engine: str) -> None:
    """InputError unless ``engine`` is one of ENGINES, or when it is ``ctranslate2`` and
    CTranslate2 cannot be imported (naming how to install it): checks that need no model."""
    if engine not in ENGINES:
        raise InputError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == CTRANSLATE2 and not ctranslate2_compute_types():
        raise InputError(INSTALL)


@functools.cache
def ctranslate2_compute_types() -> frozenset[str]:
    """CTranslate2's compute types on this CPU (empty when it is not installed or fails to load)."""
    try:
        import ctranslate2
    except ImportError:
        return frozenset()
    return frozenset(ctranslate2.get_supported_compute_types("cpu"))


def unsupported_options(options: DecodeOptions, *, log_probs: bool = False) -> list[str]:
    """The fields of ``options`` set away from their default that CTranslate2 is not given: in no
    call (``log_probs`` False), or in a call that wants the log-probabilities (True)."""
    return list(_unsupported(options, log_probs))


@functools.lru_cache(maxsize=64)
def _unsupported(options: DecodeOptions, log_probs: bool) -> tuple[str, ...]:
    default = DecodeOptions()
    greedy = options.beam_size == 1 and options.nbest is None
    given = MAPPED_OPTIONS | (GREEDY_TEXT_OPTIONS if greedy and not log_probs else frozenset())
    return tuple(f.name for f in dataclasses.fields(options) if f.name not in given
                 and getattr(options, f.name) != getattr(default, f.name))


def length_limits(sources: list[list[int]], options: DecodeOptions, *, pad_id: int,
                  model_max_len: int, prefixes: list[list[int]] | None = None) -> list[int]:
    """Each sentence's length limit as :func:`transformer.decoding.plan.plan` makes it
    (:func:`~transformer.decoding.bounds.output_limits` of the id lists ``sources``, raised for
    ``min_length`` and for each one's target prefix), in plain Python: a call's worth of tensor
    operations is a tenth of a millisecond, which at one short sentence a call is a few percent
    of CTranslate2's decoding."""
    cap = model_max_len if options.max_len is None else min(options.max_len, model_max_len)
    least = min(options.min_length + 1, cap) if options.min_length else 1
    if options.max_len_a is None:
        limits = [cap] * len(sources)
    else:
        a, b = float(options.max_len_a), options.max_len_b
        limits = [max(min(max(length_limit(sum(i != pad_id for i in ids), a, b), 1), cap), least)
                  for ids in sources]
    if prefixes is None or not any(prefixes):
        return limits
    return [max(limit, len(prefix) + 1) if prefix else limit
            for limit, prefix in zip(limits, prefixes, strict=True)]


def choose_engine(loaded: LoadedModel, *, engine: str, precision: str,
                  options: DecodeOptions) -> tuple[str, str, str]:
    """``(engine that decodes, precision it runs, why)``, chosen once for the asked ``engine``
    (auto, torch, ctranslate2), the asked ``precision`` and ``options``; ``why`` is one line for
    the log. Where CTranslate2 decodes, ``auto`` precision is fp32 (CTranslate2 has no bf16 on a
    CPU); where ours does, the precision is returned as asked, for the loader to resolve (its
    ``auto`` probe times ours)."""
    from transformer.hardware import detect_cpu

    check_engine(engine)
    if engine == TORCH:
        return TORCH, precision, "asked for"
    unmapped = unsupported_options(options)
    if unmapped:
        return TORCH, precision, f"CTranslate2 is not given {', '.join(unmapped)}"
    device = loaded.device_type
    types = ctranslate2_compute_types()
    theirs = "fp32" if precision == "auto" else precision
    if engine == CTRANSLATE2:
        if device != "cpu":
            return TORCH, precision, f"CTranslate2 runs here on the CPU only; the model is on {device}"
        if CT2_COMPUTE_TYPES.get(theirs) not in types:
            return TORCH, precision, f"CTranslate2 has no {theirs} on this CPU"
        return CTRANSLATE2, theirs, "asked for"
    chosen, why = auto_engine(detect_cpu(), precision=theirs, d_model=int(loaded.config.d_model),
                              device=device, ctranslate2_types=types)
    return (CTRANSLATE2, theirs, f"auto: {why}") if chosen == CTRANSLATE2 else (TORCH, precision, f"auto: {why}")


def translator_with_engine(loaded: LoadedModel, *, engine: str, asked: str, why: str,
                           options: DecodeOptions, batch_size: int, precision: str) -> Translator:
    """A :class:`Translator` (ours) or :class:`CTranslate2Translator` over ``loaded``, for the
    ``engine`` :func:`choose_engine` chose (``asked`` for, ``why``), at ``precision`` (resolved);
    logs which."""
    kw = dict(options=options, batch_size=batch_size, precision=precision)
    if engine == CTRANSLATE2:
        translator: Translator = CTranslate2Translator.from_loaded(loaded, **kw)
    else:
        translator = Translator.from_loaded(loaded, **kw)
        if asked == CTRANSLATE2:
            log.warning("engine: ours, not CTranslate2: %s", why)
    log.info("engine: %s (%s; %s)", translator.engine, precision, why)
    return translator


class CTranslate2Translator(Translator):
    """A :class:`Translator` whose batches CTranslate2 decodes (on the CPU, with as many threads
    as torch has or would have: :func:`transformer.hardware.intra_op_threads`); everything else (tokenizing, splitting, ordering, the model's limits) is the
    Translator's. Options CTranslate2 is not given run on ours (:func:`unsupported_options`), and
    only then is our copy of the model built and its weights read (``model``, ``decoder``)."""

    engine = CTRANSLATE2

    def __init__(self, loaded: LoadedModel, *, model_path: Any, bos_id: int, eos_id: int,
                 options: DecodeOptions | None = None, batch_size: int = 64,
                 precision: str = "fp32") -> None:
        import ctranslate2

        from transformer.hardware import intra_op_threads

        src_tokenizer, tgt_tokenizer = loaded.src_tokenizer, loaded.tgt_tokenizer
        assert tgt_tokenizer is not None  # a translation model (the loader checks)
        self._setup(loaded.config, loaded.device, src_tokenizer, tgt_tokenizer, bos_id=bos_id,
                    eos_id=eos_id, options=options, batch_size=batch_size, precision=precision,
                    record=loaded.record)
        self.loaded = loaded
        self._decoder: Any = None
        self.ct2 = ctranslate2.Translator(str(model_path), device="cpu",
                                          compute_type=CT2_COMPUTE_TYPES[self.precision],
                                          intra_threads=intra_op_threads(), inter_threads=1)
        self.model_path = model_path
        self.src_pieces = src_tokenizer.all_pieces()  # (16,000 calls one by one: 30 ms of a command)
        self.tgt_pieces = (self.src_pieces if tgt_tokenizer is src_tokenizer
                           else tgt_tokenizer.all_pieces())
        self.tgt_ids: dict[str, int] = {}
        for i, piece in enumerate(self.tgt_pieces):
            self.tgt_ids.setdefault(piece, i)
        # CTranslate2 ends each source with EOS itself when the source tokenizer does (Marian)
        self.strip_eos = bool(getattr(src_tokenizer, "append_eos", False))
        self.fallbacks: set[tuple[str, ...]] = set()  # option sets already logged as run on ours

    @property
    def model(self) -> torch.nn.Module:  # type: ignore[override]
        """Our copy of the model, read on first use (options CTranslate2 is not given, alignments)."""
        return self.loaded.model

    @property
    def decoder(self) -> Any:  # type: ignore[override]
        """Our decoding fast path over :attr:`model`, made on first use."""
        if self._decoder is None:
            from transformer.decoding.fast_decoder import decoder_for

            self._decoder = decoder_for(self.model, precision=self.precision)
        return self._decoder

    @classmethod
    def from_loaded(cls, loaded: LoadedModel, *, options: DecodeOptions | None = None,
                    batch_size: int = 64, precision: str = "fp32") -> CTranslate2Translator:
        """A CTranslate2 translator of a loaded model directory, converting it on first use."""
        from transformer.convert.ctranslate2 import cached_ctranslate2
        from transformer.data.tokenizer import BOS_ID, EOS_ID

        path = cached_ctranslate2(loaded, precision=precision)
        return cls(loaded, model_path=path, bos_id=BOS_ID, eos_id=EOS_ID,
                   options=options or loaded.record.decode_options(), batch_size=batch_size,
                   precision=precision)

    def _call_size(self, opt: DecodeOptions, *, log_probs: bool,
                   constraints: list[list[list[int]]] | None,
                   on_token: Callable[[int], None] | None) -> int:
        """Where CTranslate2 decodes the whole call, :data:`CALL_BATCHES` batches a call: it sorts
        and batches them itself (``max_batch_size``), in C++, so a call's Python and the calls
        per length limit are paid once for many batches; ours (an option it is not given,
        constraints, one sentence's tokens as they come) decodes a batch a call."""
        if (_unsupported(opt, log_probs) or on_token is not None
                or (constraints is not None and any(constraints))):
            return self.batch_size
        return self.batch_size * CALL_BATCHES

    def _decode(self, sources: list[list[int]], opt: DecodeOptions, *, prefixes: list[list[int]],
                keys: list[object], seed: int, log_probs: bool = True,
                forbid: list[list[int]] | None = None,
                constraints: list[list[list[int]]] | None = None,
                on_token: Callable[[int], None] | None = None) -> list[list[Hypothesis]]:
        """One batch (B id lists): CTranslate2's greedy or beam search within each sentence's
        length limit, or ours for options it is not given in this call (and for constraints);
        ``on_token``: one greedy source, its ids told as CTranslate2 yields them."""
        unmapped = _unsupported(opt, log_probs) + (
            ("constraints",) if constraints and any(constraints) else ())
        ours = functools.partial(super()._decode, opt=opt, keys=keys, seed=seed, log_probs=log_probs,
                                 forbid=forbid)
        if unmapped:
            if unmapped not in self.fallbacks:
                self.fallbacks.add(unmapped)
                log.info("engine: ours for %s (CTranslate2 is not given them%s)", ", ".join(unmapped),
                         " where log-probabilities are wanted" if not _unsupported(opt, False) else "")
            return ours(sources, prefixes=prefixes, constraints=constraints, on_token=on_token)
        config = self.config
        limits = length_limits(sources, opt, pad_id=config.pad_id, model_max_len=config.max_len,
                               prefixes=prefixes)
        pieces = [[self.src_pieces[i] for i in (ids[:-1] if self.strip_eos and ids
                                                 and ids[-1] == self.eos_id else ids)]
                  for ids in sources]
        greedy = opt.beam_size == 1 and opt.nbest is None
        steer = self._steering(opt, forbid, no_pad=greedy and not log_probs)
        starts = [[self.tgt_pieces[i] for i in prefix] or None for prefix in prefixes]
        out: list[list[Hypothesis]] = [[] for _ in sources]
        rows = list(range(len(sources)))
        if on_token is not None:  # one greedy source, as it comes (CTranslate2 threads it)
            out = [[self._tokens(pieces[0], starts[0], limits[0], on_token, forced=len(prefixes[0]),
                                 **steer)]]
            rows = []
        elif greedy:
            # greedy is prefix-consistent: one call to the longest limit, each row cut to its own;
            # a row that ran past its own limit is searched again to it, for its log-probability
            found = self._search(pieces, starts, beam=1, count=1, limit=max(limits), scores=log_probs,
                                 **steer)
            rows = [i for i, (candidates, limit) in enumerate(zip(found, limits, strict=True))
                    if not candidates or (log_probs and len(candidates[0][0]) + candidates[0][2] > limit)]
            for i in set(range(len(sources))) - set(rows):
                out[i] = [_greedy(found[i][0], limits[i], len(prefixes[i]))]
        for limit in sorted({limits[i] for i in rows}):  # beam search: one call per limit
            chosen = [i for i in rows if limits[i] == limit]
            found = self._search([pieces[i] for i in chosen], [starts[i] for i in chosen],
                                 beam=opt.beam_size, count=opt.beam_size, limit=limit, scores=True,
                                 **steer)
            for i, candidates in zip(chosen, found, strict=True):
                out[i] = ([_greedy(candidates[0], limit, len(prefixes[i]))] if greedy and candidates
                          else self._ranked(candidates, opt, len(prefixes[i])))
        # CTranslate2 may produce PAD, which ours never does (it is not a word; ours leaves it out
        # of the choice, not of the log-probabilities, so CTranslate2's suppress_sequences would
        # score differently): those rare sentences are decoded again by ours
        again = [i for i, candidates in enumerate(out) if not candidates
                 or any(config.pad_id in found.ids for found in candidates)]
        if again:
            redone = ours([sources[i] for i in again], prefixes=[prefixes[i] for i in again])
            for i, candidates in zip(again, redone, strict=True):
                out[i] = candidates
        return out

    def _steering(self, opt: DecodeOptions, forbid: list[list[int]] | None, *,
                  no_pad: bool) -> dict[str, Any]:
        """The guards, the least length and the forbidden sequences as CTranslate2 takes them
        (only their defaults unless the call is a greedy one without log-probabilities); with
        ``no_pad`` (such a call), PAD too, which ours never produces: a greedy choice without
        scores is ours whatever CTranslate2 renormalises, and no sentence is decoded again."""
        sequences = [[self.tgt_pieces[i] for i in ids] for ids in forbid or []]
        if no_pad:
            sequences.append([self.tgt_pieces[self.config.pad_id]])
        return {"repetition_penalty": opt.repetition_penalty, "no_repeat_ngram_size": opt.no_repeat_ngram,
                "min_decoding_length": opt.min_length, "suppress_sequences": sequences or None}

    def _tokens(self, pieces: list[str], start: list[str] | None, limit: int,
                on_token: Callable[[int], None], *, forced: int, min_decoding_length: int = 0,
                **steer: Any) -> Hypothesis:
        """CTranslate2's greedy translation of one source to ``limit`` tokens, each id told to
        ``on_token`` as it is decoded (the prefix's too, EOS last); scored as :meth:`_search`
        scores it (the sum of its tokens' log-probabilities)."""
        unk = self.tgt_ids.get("<unk>", 1)
        ids: list[int] = []
        total = 0.0
        for step in self.ct2.generate_tokens(
                pieces, target_prefix=start, max_decoding_length=limit,
                min_decoding_length=min(min_decoding_length, limit), max_input_length=0,
                return_log_prob=True, **steer):
            ids.append(self.tgt_ids.get(step.token, unk))
            total += float(step.log_prob)
            on_token(ids[-1])
        ended = bool(ids) and ids[-1] == self.eos_id
        return _greedy((ids[:-1] if ended else ids, total, ended), limit, forced)

    def _search(self, pieces: list[list[str]], starts: list[list[str] | None], *, beam: int,
                count: int, limit: int, scores: bool = False, min_decoding_length: int = 0,
                **steer: Any) -> list[list[tuple[list[int], float, bool]]]:
        """CTranslate2's ``count`` best hypotheses of each source by log-probability, without
        a length penalty, each starting with its target prefix (``starts``, pieces or None):
        ``(ids without EOS, log-probability, ended by EOS)`` each."""
        results = self.ct2.translate_batch(
            pieces, target_prefix=starts if any(starts) else None, max_batch_size=self.batch_size,
            beam_size=beam,
            num_hypotheses=count, length_penalty=0.0, max_decoding_length=limit,
            min_decoding_length=min(min_decoding_length, limit), max_input_length=0,
            return_scores=scores, return_end_token=True, **steer)
        unk, eos = self.tgt_ids.get("<unk>", 1), self.eos_id
        out = []
        for r in results:
            hypotheses = []
            for pieces_out, score in zip(r.hypotheses, r.scores or [0.0] * len(r.hypotheses),
                                         strict=True):
                ids = [self.tgt_ids.get(p, unk) for p in pieces_out]
                ended = bool(ids) and ids[-1] == eos
                hypotheses.append((ids[:-1] if ended else ids, float(score), ended))
            out.append(hypotheses)
        return out

    def _ranked(self, hypotheses: list[tuple[list[int], float, bool]], opt: DecodeOptions,
                forced: int = 0) -> list[Hypothesis]:
        """The hypotheses ranked by our score, the log-probability over the GNMT penalty of the
        length with EOS and without the ``forced`` prefix tokens (CTranslate2's own penalty
        divides by length ** alpha, which ranks differently), best first, as many as asked for."""
        alpha = opt.length_penalty
        scored = [Hypothesis(ids, logp / ((5.0 + max(len(ids) + ended - forced, 1)) / 6.0) ** alpha,
                             logp, len(ids) + ended - forced) for ids, logp, ended in hypotheses]
        scored.sort(key=lambda found: -found.score)
        return scored[: opt.nbest or 1]


def _greedy(found: tuple[list[int], float, bool], limit: int, forced: int = 0) -> Hypothesis:
    """A greedy result cut to ``limit`` tokens (EOS included), scored by its log-probability;
    ``forced``: its prefix's tokens, which its count leaves out."""
    ids, logp, ended = found
    return Hypothesis(ids[:limit], logp, logp, min(len(ids), limit) + ended - forced)
