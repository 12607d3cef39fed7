"""A translation run's inputs from text: the corpus read, encoded with the run's tokenizers and
batched, with validation batches and the BLEU sample; what :mod:`~transformer.training.prepared_inputs`
gives for a prepared data directory, from parallel text instead.

    splits = load_splits(cfg)                                  # {"train": ..., "valid": ...}
    inputs = text_inputs(splits, cfg, src_tokenizer=src, tgt_tokenizer=tgt, max_len=..., rank=0,
                         world_size=1, validation=True)
    trainer = Trainer(..., train_data=inputs.data, ...)
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any

from transformer.config.runs import TranslationTrainConfig
from transformer.data.batch_types import Batch
from transformer.data.collation import collate_pairs
from transformer.data.encoding import EncodedPairs, encode_pairs
from transformer.data.epoch_batches import Epochs
from transformer.data.parallel import ParallelCorpus
from transformer.data.prepared.mixing import MixedEpochs
from transformer.data.sampled_epochs import SampledEpochs
from transformer.data.token_batch_sampler import TokenBatchSampler
from transformer.data.tokenizer import Tokenizer
from transformer.data.tokenizer_pair import train_tokenizers
from transformer.errors import InputError
from transformer.training import distributed as D

log = logging.getLogger(__name__)


def load_splits(cfg: TranslationTrainConfig) -> dict[str, ParallelCorpus]:
    """``{"train": ..., "valid": ...}`` (valid may be absent for explicit files without one)."""
    from transformer.data.parallel import read_parallel

    if cfg.data == "numbers":
        from transformer.data.builtin_task import number_task_splits

        splits = number_task_splits(cfg.seed)
        return {"train": splits["train"], "valid": splits["valid"]}
    if cfg.data == "multi30k":
        from transformer.data.corpora import load_corpus

        return {split: load_corpus("multi30k", name, cfg.src_lang, cfg.tgt_lang)
                for split, name in (("train", "train"), ("valid", "val"))}
    assert cfg.train_src and cfg.train_tgt
    splits = {"train": read_parallel(cfg.train_src, cfg.train_tgt)}
    if cfg.valid_src and cfg.valid_tgt:
        splits["valid"] = read_parallel(cfg.valid_src, cfg.valid_tgt)
    return splits


def read_splits(cfg: TranslationTrainConfig) -> dict[str, ParallelCorpus]:
    """:func:`load_splits`, logged with its sizes and time."""
    began = time.perf_counter()
    splits = load_splits(cfg)
    _stage("read", began, ", ".join(f"{name} {len(corpus):,} pairs"
                                     for name, corpus in splits.items()))
    return splits


def _stage(name: str, began: float, what: str) -> None:
    """One log line per data stage: what it made and how long it took."""
    log.info("data: %s: %s (%.1fs)", name, what, time.perf_counter() - began)


def bleu_sample(corpus: ParallelCorpus, *, k: int, seed: int) -> tuple[list[str], list[str]]:
    """A fixed random sample of ``k`` validation pairs (sources, references), in corpus order."""
    index = range(len(corpus))
    if k < len(corpus):
        index = sorted(random.Random(seed).sample(range(len(corpus)), k))
    return [corpus.src[i] for i in index], [corpus.tgt[i] for i in index]


@dataclass
class TranslationInputs:
    """What a translation run needs from its data, read from text (:func:`text_inputs`) or a
    prepared directory (:func:`~transformer.training.data_dir_inputs.prepared_inputs`):
    ``data`` (the Trainer's epochs), the validation batches and BLEU sample, and ``record``
    (config.json's ``data`` section)."""

    data: Epochs | MixedEpochs | SampledEpochs
    train_pairs: int
    valid_batches: list[Batch] = field(default_factory=list)
    bleu_sources: list[list[int]] = field(default_factory=list)
    bleu_references: list[str] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)


def text_inputs(splits: dict[str, ParallelCorpus], cfg: TranslationTrainConfig, *,
                src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer, max_len: int, rank: int,
                world_size: int, validation: bool) -> TranslationInputs:
    """``splits["train"]`` encoded and fitted to ``max_len`` positions (``cfg.on_long``) as this
    rank's share of each epoch's token-budget batches; with ``validation`` (rank 0) and a
    ``splits["valid"]``, its batches and BLEU sample (``cfg.bleu_sample`` sources, ids)."""
    train, valid = splits["train"], splits.get("valid")
    began = time.perf_counter()
    encoded = encode_pairs(train, src_tokenizer, tgt_tokenizer, max_len=max_len, on_long=cfg.on_long)
    _stage("encode", began, f"{len(encoded):,} training pairs, "
           f"{sum(s + t for s, t in encoded.lengths):,} tokens")
    if len(encoded) == 0:
        raise InputError(f"{train.name or 'training data'}: no usable sentence pairs")
    max_tokens = max(cfg.max_tokens, max(encoded.widths))  # one pair always fits a batch
    data: Epochs | SampledEpochs = Epochs(encoded, widths=encoded.lengths, collate=collate_pairs,
                                          max_tokens=max_tokens, seed=cfg.seed, rank=rank,
                                          world_size=world_size)
    if cfg.subword_sampling > 0:
        data = sampled_pairs(train, cfg, src_tokenizer, tgt_tokenizer, max_len=max_len,
                             max_tokens=cfg.max_tokens, rank=rank, world_size=world_size)
    inputs = TranslationInputs(data=data, train_pairs=len(encoded), record={
        "train": train.name, "valid": valid.name if valid is not None else None,
        "train_pairs": len(encoded), "valid_pairs": len(valid) if valid is not None else 0})
    if valid is not None and len(valid) > 0 and validation:
        enc_valid = encode_pairs(valid, src_tokenizer, tgt_tokenizer, max_len=max_len,
                                 on_long="truncate")
        sampler = TokenBatchSampler(enc_valid.lengths, max_tokens=max(max_tokens, 2 * cfg.max_tokens),
                                    shuffle=False)
        inputs.valid_batches = [collate_pairs([enc_valid[i] for i in idx]) for idx in sampler]
        if cfg.bleu_sample:
            sources, inputs.bleu_references = bleu_sample(valid, k=cfg.bleu_sample, seed=cfg.seed)
            inputs.bleu_sources = [ids[:max_len] for ids in src_tokenizer.encode_batch(sources)]
    return inputs


def sampled_pairs(train: ParallelCorpus, cfg: TranslationTrainConfig, src_tokenizer: Tokenizer,
                  tgt_tokenizer: Tokenizer, *, max_len: int, max_tokens: int, rank: int,
                  world_size: int) -> SampledEpochs:
    """The training pairs encoded anew each epoch with SentencePiece's sampling
    (``cfg.subword_sampling``), from the run's seed and the epoch
    (:mod:`transformer.data.sampled_epochs`). InputError for a tokenizer that cannot sample."""
    for tok in (src_tokenizer, tgt_tokenizer):
        if not hasattr(tok, "sample_batch"):
            raise InputError(f"--subword-sampling needs SentencePiece tokenizers; this run's are "
                             f"{type(tok).__name__}")

    def encode(seed: int) -> tuple[EncodedPairs, list[tuple[int, int]], int]:
        began = time.perf_counter()
        encoded = encode_pairs(train, src_tokenizer, tgt_tokenizer, max_len=max_len,
                               on_long=cfg.on_long, sampling=cfg.subword_sampling, seed=seed)
        _stage("sample", began, f"{len(encoded):,} training pairs, "
               f"{sum(s + t for s, t in encoded.lengths):,} tokens")
        return encoded, encoded.lengths, max(encoded.widths, default=1)

    return SampledEpochs(encode, collate=collate_pairs, max_tokens=max_tokens, seed=cfg.seed,
                         rank=rank, world_size=world_size)


@dataclass(frozen=True)
class TextSource:
    """A translation run's data as parallel text (``splits``: {"train", "valid"} corpora): its
    tokenizers are trained on the training side, its pairs encoded with them (what
    :class:`~transformer.training.data_dir_inputs.PreparedSource` is for a prepared directory)."""

    splits: dict[str, ParallelCorpus]

    def tokenizers(self, cfg: TranslationTrainConfig) -> tuple[Tokenizer, Tokenizer]:
        """SentencePiece tokenizers trained on the training text by rank 0, the same on every
        rank."""
        train = self.splits["train"]
        info = D.current()
        pair = None
        if info.is_main:
            pair = train_tokenizers(train.src, train.tgt, vocab_size=cfg.vocab_size,
                                    joint=cfg.joint, model_type=cfg.model_type,
                                    byte_fallback=cfg.byte_fallback,
                                    character_coverage=cfg.character_coverage, seed=cfg.seed)
        if info.is_distributed:
            return broadcast_tokenizers(pair)
        assert pair is not None
        return pair

    def check_tokenizers(self, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer, *,
                         where: str) -> None:
        """Text takes any tokenizers: nothing to check."""

    def inputs(self, cfg: TranslationTrainConfig, *, src_tokenizer: Tokenizer,
               tgt_tokenizer: Tokenizer, max_len: int, rank: int, world_size: int,
               validation: bool) -> TranslationInputs:
        """:func:`text_inputs` of the splits."""
        return text_inputs(self.splits, cfg, src_tokenizer=src_tokenizer,
                           tgt_tokenizer=tgt_tokenizer, max_len=max_len, rank=rank,
                           world_size=world_size, validation=validation)


def broadcast_tokenizers(pair: tuple[Tokenizer, Tokenizer] | None) -> tuple[Tokenizer, Tokenizer]:
    """Rank 0's tokenizers on every rank (sent as SentencePiece model bytes)."""
    protos = None if pair is None else (pair[0].to_bytes(), pair[1].to_bytes())
    protos = D.broadcast_object(protos)
    src = Tokenizer.from_bytes(protos[0])
    return (src, src) if protos[1] == protos[0] else (src, Tokenizer.from_bytes(protos[1]))
