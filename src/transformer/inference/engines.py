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
import math
from typing import TYPE_CHECKING, Any

import torch

from transformer.config.choices import ENGINES
from transformer.config.decoding import DecodeOptions
from transformer.decoding.common import Hypothesis
from transformer.decoding.fast_decoder import decoder_for
from transformer.errors import InputError
from transformer.inference.engine_choice import CT2_COMPUTE_TYPES, CTRANSLATE2, TORCH, auto_engine
from transformer.inference.translator import Translator

if TYPE_CHECKING:
    from transformer.model_dir import LoadedModel

log = logging.getLogger(__name__)

INSTALL = "CTranslate2 is not installed: pip install 'transformer[convert]' (or pip install ctranslate2)"
# the DecodeOptions fields CTranslate2 is given; any other field set away from its default runs on ours
MAPPED_OPTIONS = frozenset({"beam_size", "length_penalty", "nbest", "max_len_a", "max_len_b", "max_len"})


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


def unsupported_options(options: DecodeOptions) -> list[str]:
    """The fields of ``options`` CTranslate2 is not given that are set away from their default."""
    return list(_unsupported(options))


@functools.lru_cache(maxsize=64)
def _unsupported(options: DecodeOptions) -> tuple[str, ...]:
    default = DecodeOptions()
    return tuple(f.name for f in dataclasses.fields(options) if f.name not in MAPPED_OPTIONS
                 and getattr(options, f.name) != getattr(default, f.name))


def length_limits(sources: list[list[int]], options: DecodeOptions, *, pad_id: int,
                  model_max_len: int) -> list[int]:
    """:func:`transformer.decoding.common.output_limits` of the id lists ``sources``, in plain
    Python (a call's worth of tensor operations is a tenth of a millisecond, which at one short
    sentence a call is a few percent of CTranslate2's decoding)."""
    cap = model_max_len if options.max_len is None else min(options.max_len, model_max_len)
    if options.max_len_a is None:
        return [cap] * len(sources)
    a, b = float(options.max_len_a), options.max_len_b
    return [min(max(math.floor(sum(i != pad_id for i in ids) * a + b), 1), cap) for ids in sources]


def choose_engine(loaded: LoadedModel, *, engine: str, precision: str,
                  options: DecodeOptions) -> tuple[str, str]:
    """``(engine that runs, why)`` for the asked ``engine`` (auto, torch, ctranslate2) and the
    ``precision`` that runs; ``why`` is one line for the log."""
    from transformer.hardware import detect_cpu

    check_engine(engine)
    if engine == TORCH:
        return TORCH, "asked for"
    device = loaded.device.type
    types = ctranslate2_compute_types()
    unmapped = unsupported_options(options)
    if engine == CTRANSLATE2:
        if unmapped:
            return TORCH, f"CTranslate2 is not given {', '.join(unmapped)}"
        if device != "cpu":
            return TORCH, f"CTranslate2 runs here on the CPU only; the model is on {device}"
        if CT2_COMPUTE_TYPES.get(precision) not in types:
            return TORCH, f"CTranslate2 has no {precision} on this CPU"
        return CTRANSLATE2, "asked for"
    chosen, why = auto_engine(detect_cpu(), precision=precision,
                              d_model=int(loaded.config.d_model), device=device,
                              ctranslate2_types=types)
    if chosen == CTRANSLATE2 and unmapped:
        return TORCH, f"CTranslate2 is not given {', '.join(unmapped)}"
    return chosen, f"auto: {why}"


def precision_for_engine(loaded: LoadedModel, *, engine: str, precision: str) -> str:
    """``precision`` as the loader should resolve it for ``engine``: ``auto`` becomes ``fp32``
    where CTranslate2 will decode (asked for, or chosen by ``auto`` in float32), since the
    ``auto`` probe of bf16 times ours and CTranslate2 has no bf16 on a CPU; else unchanged."""
    if precision != "auto" or engine == TORCH:
        return precision
    if engine == CTRANSLATE2:
        return "fp32"
    from transformer.hardware import detect_cpu

    device = loaded.device.type
    chosen, _ = auto_engine(detect_cpu(), precision="fp32", d_model=int(loaded.config.d_model),
                            device=device, ctranslate2_types=ctranslate2_compute_types())
    return "fp32" if chosen == CTRANSLATE2 else precision


def translator_with_engine(loaded: LoadedModel, *, engine: str, options: DecodeOptions,
                           batch_size: int, precision: str) -> Translator:
    """A :class:`Translator` (ours) or :class:`CTranslate2Translator` over ``loaded``, whichever
    ``engine`` picks (:func:`choose_engine`), at ``precision`` (already resolved); logs which."""
    chosen, why = choose_engine(loaded, engine=engine, precision=precision, options=options)
    kw = dict(options=options, batch_size=batch_size, precision=precision)
    if chosen == CTRANSLATE2:
        translator: Translator = CTranslate2Translator.from_loaded(loaded, **kw)
    else:
        translator = Translator.from_loaded(loaded, **kw)
        if engine == CTRANSLATE2:
            log.warning("engine: ours, not CTranslate2: %s", why)
    log.info("engine: %s (%s; %s)", translator.engine, precision, why)
    return translator


class CTranslate2Translator(Translator):
    """A :class:`Translator` whose batches CTranslate2 decodes (on the CPU, with as many threads
    as torch has); everything else (tokenizing, splitting, ordering, the model's limits) is the
    Translator's. Options CTranslate2 is not given run on ours (:func:`unsupported_options`), and
    only then is our copy of the model built and its weights read (``model``, ``decoder``)."""

    engine = CTRANSLATE2

    def __init__(self, loaded: LoadedModel, *, model_path: Any, bos_id: int, eos_id: int,
                 options: DecodeOptions | None = None, batch_size: int = 64,
                 precision: str = "fp32") -> None:
        import ctranslate2

        src_tokenizer, tgt_tokenizer = loaded.src_tokenizer, loaded.tgt_tokenizer
        assert tgt_tokenizer is not None  # a translation model (the loader checks)
        self._setup(loaded.config, loaded.device, src_tokenizer, tgt_tokenizer, bos_id=bos_id,
                    eos_id=eos_id, options=options, batch_size=batch_size, precision=precision,
                    record=loaded.record)
        self.loaded = loaded
        self._decoder: Any = None
        self.ct2 = ctranslate2.Translator(str(model_path), device="cpu",
                                          compute_type=CT2_COMPUTE_TYPES[self.precision],
                                          intra_threads=torch.get_num_threads(), inter_threads=1)
        self.model_path = model_path
        self.src_pieces = [src_tokenizer.id_to_piece(i) for i in range(src_tokenizer.vocab_size)]
        self.tgt_ids: dict[str, int] = {}
        for i in range(tgt_tokenizer.vocab_size):
            self.tgt_ids.setdefault(tgt_tokenizer.id_to_piece(i), i)
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

    def _decode(self, sources: list[list[int]], *, prefixes: list[list[int]], keys: list[object],
                seed: int, log_probs: bool = True,
                constraints: list[list[list[int]]] | None = None) -> list[list[Hypothesis]]:
        """One batch (B id lists): CTranslate2's greedy or beam search within each sentence's
        length limit, or ours for options it is not given (and for target prefixes and
        constraints)."""
        unmapped = _unsupported(self.options) + (("target prefixes",) if any(prefixes) else ()) + (
            ("constraints",) if constraints and any(constraints) else ())
        ours = functools.partial(super()._decode, keys=keys, seed=seed, log_probs=log_probs)
        if unmapped:
            if unmapped not in self.fallbacks:
                self.fallbacks.add(unmapped)
                log.info("engine: ours for %s (CTranslate2 is not given them)", ", ".join(unmapped))
            return ours(sources, prefixes=prefixes, constraints=constraints)
        opt, config = self.options, self.config
        limits = length_limits(sources, opt, pad_id=config.pad_id, model_max_len=config.max_len)
        pieces = [[self.src_pieces[i] for i in (ids[:-1] if self.strip_eos and ids
                                                 and ids[-1] == self.eos_id else ids)]
                  for ids in sources]
        out: list[list[Hypothesis]] = [[] for _ in sources]
        greedy = opt.beam_size == 1 and opt.nbest is None
        rows = list(range(len(sources)))
        if greedy:
            # greedy is prefix-consistent: one call to the longest limit, each row cut to its own;
            # a row that ran past its own limit is searched again to it, for its log-probability
            found = self._search(pieces, beam=1, count=1, limit=max(limits), scores=log_probs)
            rows = [i for i, (candidates, limit) in enumerate(zip(found, limits, strict=True))
                    if not candidates or (log_probs and len(candidates[0][0]) + candidates[0][2] > limit)]
            for i in set(range(len(sources))) - set(rows):
                out[i] = [_greedy(found[i][0], limits[i])]
        for limit in sorted({limits[i] for i in rows}):  # beam search: one call per limit
            chosen = [i for i in rows if limits[i] == limit]
            found = self._search([pieces[i] for i in chosen], beam=opt.beam_size,
                                 count=opt.beam_size, limit=limit, scores=True)
            for i, candidates in zip(chosen, found, strict=True):
                out[i] = [_greedy(candidates[0], limit)] if greedy and candidates else self._ranked(candidates)
        # CTranslate2 may produce PAD, which ours never does (it is not a word; ours leaves it out
        # of the choice, not of the log-probabilities, so CTranslate2's suppress_sequences would
        # score differently): those rare sentences are decoded again by ours
        again = [i for i, candidates in enumerate(out) if not candidates
                 or any(config.pad_id in found.ids for found in candidates)]
        if again:
            redone = ours([sources[i] for i in again], prefixes=[[] for _ in again])
            for i, candidates in zip(again, redone, strict=True):
                out[i] = candidates
        return out

    def _search(self, pieces: list[list[str]], *, beam: int, count: int, limit: int,
                scores: bool = False) -> list[list[tuple[list[int], float, bool]]]:
        """CTranslate2's ``count`` best hypotheses of each source by log-probability, without
        a length penalty: ``(ids without EOS, log-probability, ended by EOS)`` each."""
        results = self.ct2.translate_batch(
            pieces, beam_size=beam, num_hypotheses=count, length_penalty=0.0,
            max_decoding_length=limit, min_decoding_length=0, max_input_length=0,
            return_scores=scores, return_end_token=True)
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

    def _ranked(self, hypotheses: list[tuple[list[int], float, bool]]) -> list[Hypothesis]:
        """The hypotheses ranked by our score, the log-probability over the GNMT penalty of the
        length with EOS (CTranslate2's own penalty divides by length ** alpha, which ranks
        differently), best first, as many as asked for."""
        alpha = self.options.length_penalty
        scored = [Hypothesis(ids, logp / ((5.0 + len(ids) + ended) / 6.0) ** alpha, logp,
                             len(ids) + ended) for ids, logp, ended in hypotheses]
        scored.sort(key=lambda found: -found.score)
        return scored[: self.options.nbest or 1]


def _greedy(found: tuple[list[int], float, bool], limit: int) -> Hypothesis:
    """A greedy result cut to ``limit`` tokens (EOS included), scored by its log-probability."""
    ids, logp, ended = found
    return Hypothesis(ids[:limit], logp, logp, min(len(ids), limit) + ended)
