"""Forced decoding: the log-probability a translation model gives to translations it is handed,
for filtering a corpus and reranking candidates (as Marian's scorer and fairseq's
``--score-reference`` do).

    scorer = load_scorer("runs/m30k")
    scores = score_pairs(scorer, ["A dog runs."], ["Ein Hund rennt."])
    scores[0].log_prob, scores[0].log_prob_per_token, scores[0].tokens

A pair is read exactly as training reads it (:func:`~transformer.data.collation.collate_pairs`:
``tgt_in`` = BOS + target, ``tgt_out`` = target + EOS) and its score is
``sum_t log p(tgt_out[t] | source, tgt_in[:t+1])`` over the target's tokens and EOS: the negative
of the training loss's sum with label smoothing 0. Pairs are batched by the training batcher
(:class:`~transformer.data.token_batch_sampler.TokenBatchSampler`, a token budget, sorted by length,
never shuffled) and the scores come back in input order.

Lengths. A source longer than the model's positions is cut to fit, as ``translate`` cuts it
(:class:`~transformer.inference.translator.Translator`), and the pair says so (``cut``); a target
that does not fit (more than ``max_len - 1`` tokens: BOS or EOS takes a position) is refused with
InputError naming its line, because a cut target would score a translation other than the one
given. An empty source is scored as a source of padding only, an empty target as EOS alone.

Shapes: B pairs in a batch, S longest source, T longest target + 1, V target vocabulary.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from transformer.data.collation import collate_pairs
from transformer.data.tokenizer import BOS_ID, EOS_ID
from transformer.errors import InputError
from transformer.inference.forced import forced_batches

if TYPE_CHECKING:
    from transformer.model_dir import LoadedModel, RunRecord, TextTokenizer

log = logging.getLogger(__name__)

MAX_TOKENS = 4096  # padded positions per batch, as the server's batch budget


@dataclass(frozen=True)
class PairScore:
    """The score of one (source, target) pair: ``log_prob`` (natural log, summed over the target's
    ``tokens``, EOS included) and whether the source was ``cut`` to the model's positions."""

    log_prob: float
    tokens: int
    cut: bool = False

    @property
    def log_prob_per_token(self) -> float:
        """``log_prob`` per target token (EOS included): comparable across target lengths."""
        return self.log_prob / self.tokens

    def to_dict(self) -> dict[str, Any]:
        """The JSON fields of ``score --json`` and ``POST /v1/score``."""
        return {"log_prob": self.log_prob, "log_prob_per_token": self.log_prob_per_token,
                "tokens": self.tokens, "source_cut": self.cut}


@torch.inference_mode()
def score_ids(model: nn.Module, pairs: Sequence[tuple[Sequence[int], Sequence[int]]], *,
              max_tokens: int = MAX_TOKENS, bos_id: int = BOS_ID, eos_id: int = EOS_ID,
              on_batch: Callable[[int], None] | None = None) -> list[PairScore]:
    """Forced-decoding scores of ``(source ids, target ids)`` pairs (no BOS/EOS; each must fit the
    model: ``len(source) <= max_len``, ``len(target) < max_len``), in input order.

    Batches hold at most ``max_tokens`` padded positions (the training batcher's measure); the
    model runs in eval mode in its own dtype and the log-softmax in float32, as the training loss
    computes it; ``on_batch(pairs)`` is called after each batch (a progress bar). ValueError for a
    pair that does not fit or a budget smaller than one pair."""
    limit = int(model.config.max_len)
    pad_id = int(model.config.pad_id)
    items = [(list(s), list(t)) for s, t in pairs]
    for i, (s, t) in enumerate(items):
        if len(s) > limit or len(t) + 1 > limit:
            raise ValueError(f"pair {i}: {len(s)} source and {len(t)} target tokens do not fit "
                             f"the model's {limit} positions")
    if not items:
        return []
    out: list[PairScore | None] = [None] * len(items)
    with forced_batches(model, items, max_tokens=max_tokens) as (device, sampler):
        for indices in sampler:
            batch = collate_pairs([items[i] for i in indices], pad_id=pad_id, bos_id=bos_id,
                                  eos_id=eos_id).to(device)
            logits = model(batch.src, batch.tgt_in)  # (B, T, V)
            logp = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
            gold = logp.gather(-1, batch.tgt_out[..., None]).squeeze(-1)  # (B, T)
            keep = batch.tgt_out != pad_id  # (B, T)
            sums = torch.where(keep, gold, torch.zeros_like(gold)).sum(dim=-1)  # (B,)
            for i, total, count in zip(indices, sums.tolist(), keep.sum(dim=-1).tolist(),
                                       strict=True):
                out[i] = PairScore(float(total), int(count))
            if on_batch is not None:
                on_batch(len(indices))
    return out  # type: ignore[return-value]


class Scorer:
    """A translation model, its tokenizers and the precision it scores in: what
    :func:`score_pairs` needs. Make one with :func:`load_scorer` or :func:`scorer_for`."""

    def __init__(self, loaded: LoadedModel, *, precision: str = "fp32",
                 max_tokens: int = MAX_TOKENS) -> None:
        if loaded.tgt_tokenizer is None:
            raise InputError(f"{Path(loaded.record.source).parent} holds a classifier; only a "
                             "translation model scores translations")
        if max_tokens < 1:
            raise InputError(f"--max-tokens must be positive, got {max_tokens}")
        self.model = loaded.model
        self.src_tokenizer: TextTokenizer = loaded.src_tokenizer
        self.tgt_tokenizer: TextTokenizer = loaded.tgt_tokenizer
        self.record: RunRecord = loaded.record
        self.precision = precision
        self.max_tokens = max_tokens
        self.progress = False  # a bar over the batches of a call that has several


def _line(name: str, index: int) -> str:
    return f"{name}, line {index + 1}"


def check_pairs(sources: Sequence[str], targets: Sequence[str], *,
                names: tuple[str, str] = ("sources", "targets")) -> None:
    """InputError naming ``names`` unless there are as many targets as sources, and some."""
    src_name, tgt_name = names
    if len(sources) != len(targets):
        raise InputError(f"{tgt_name} has {len(targets)} lines but {src_name} has {len(sources)}; "
                         "give one target per source")
    if not sources:
        raise InputError(f"{src_name} holds no lines to score")


def score_pairs(scorer: Scorer, sources: Sequence[str], targets: Sequence[str], *,
                names: tuple[str, str] = ("sources", "targets"),
                where: Callable[[str, int], str] = _line) -> list[PairScore]:
    """Score each ``targets[i]`` as the translation of ``sources[i]``; one :class:`PairScore` per
    pair, in order. Each text is stripped of surrounding whitespace and tokenized with the model's
    tokenizers; sources that are too long are cut (and counted in the log), targets that are
    too long refused.

    InputError, naming ``names`` (file names, or the request's fields) and ``where(name, index)``
    (default ``"NAME, line N"``): different numbers of sources and targets, no pairs at all, a
    target longer than the model's positions (the first one, with how many more)."""
    check_pairs(sources, targets, names=names)
    tgt_name = names[1]
    limit = int(scorer.model.config.max_len)
    src_ids = [scorer.src_tokenizer.encode(s.strip()) if s.strip() else [] for s in sources]
    tgt_ids = [scorer.tgt_tokenizer.encode(t.strip()) if t.strip() else [] for t in targets]
    long = [i for i, ids in enumerate(tgt_ids) if len(ids) + 1 > limit]
    if long:
        more = f" (and {len(long) - 1} more)" if len(long) > 1 else ""
        raise InputError(f"{where(tgt_name, long[0])}: {len(tgt_ids[long[0]])} tokens, more than "
                         f"the {limit - 1} the model's positions hold (BOS or EOS takes one){more}")
    cut = [len(ids) > limit for ids in src_ids]
    if any(cut):
        log.warning("%d source sentences were longer than the model's %d positions and were cut",
                    sum(cut), limit)
    bar = None
    if scorer.progress:
        from tqdm import tqdm

        bar = tqdm(total=len(sources), unit="pair", desc="scoring", leave=False, dynamic_ncols=True)
    try:
        scores = score_ids(scorer.model, [(s[:limit], t) for s, t in zip(src_ids, tgt_ids, strict=True)],
                           max_tokens=max(scorer.max_tokens, limit + 1),
                           on_batch=bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    return [PairScore(s.log_prob, s.tokens, c) for s, c in zip(scores, cut, strict=True)]


def scorer_for(loaded: LoadedModel, *, precision: str = "auto",
               max_tokens: int = MAX_TOKENS) -> Scorer:
    """A :class:`Scorer` over an already loaded translation model. ``precision`` as
    ``translate``'s (:func:`~transformer.inference.loader.resolve_precision`), except that int8
    (a decoding fast path) scores with the float32 weights, as a classifier asked for int8 does;
    ``Scorer.precision`` says what runs."""
    from transformer.inference.loader import resolve_precision

    if loaded.tgt_tokenizer is None:  # before any weight is cast
        return Scorer(loaded)
    runs = resolve_precision(loaded, precision)
    return Scorer(loaded, precision="fp32" if runs == "int8" else runs, max_tokens=max_tokens)


def load_scorer(model_dir: str | Path, *, device: str | torch.device = "cpu",
                precision: str = "auto", max_tokens: int = MAX_TOKENS) -> Scorer:
    """Load ``model_dir`` through the one loader and return its :class:`Scorer`; InputError,
    naming the file or value, for a missing or damaged directory, a classifier or a bad option."""
    from transformer.model_dir import load_model_dir

    if max_tokens < 1:
        raise InputError(f"--max-tokens must be positive, got {max_tokens}")
    return scorer_for(load_model_dir(model_dir, device=device), precision=precision,
                      max_tokens=max_tokens)
