"""A translation run's inputs from a prepared data directory (``train --data-dir``): the
training batches read through memory maps, validation, and the manifest check on resume.

    source = open_prepared(cfg, resumed=None)                       # cfg.data_dir's PreparedSource
    inputs = source.inputs(cfg, src_tokenizer=src, tgt_tokenizer=tgt, max_len=model.config.max_len,
                           rank=0, world_size=1, validation=True)
    trainer = Trainer(..., train_data=inputs.data, ...)
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformer.config.runs import TranslationTrainConfig
from transformer.data.collation import collate_pairs
from transformer.data.prepared.directory import PreparedData
from transformer.data.prepared.layout import MANIFEST
from transformer.data.prepared.mixing import MixedEpochs
from transformer.data.token_batch_sampler import TokenBatchSampler
from transformer.data.tokenizer import Tokenizer
from transformer.errors import InputError
from transformer.model_dir import RunRecord
from transformer.training.text_inputs import TranslationInputs

log = logging.getLogger(__name__)


def open_prepared(cfg: TranslationTrainConfig, *, resumed: RunRecord | None) -> PreparedSource:
    """``cfg.data_dir`` opened. A ``resumed`` run (its record) must have started with this
    directory's manifest: another one is refused in one line."""
    assert cfg.data_dir is not None
    prepared = PreparedData.open(cfg.data_dir)
    if resumed is not None:
        started = resumed.data.get("manifest_sha256")
        if started != prepared.manifest_sha256:
            raise InputError(
                f"{Path(cfg.data_dir) / MANIFEST}: not the prepared data this run started with "
                f"(manifest sha256 {prepared.manifest_sha256[:12]}, the run's "
                f"{str(started)[:12]}); resume needs the same data, or start a new run")
    return PreparedSource(prepared)


@dataclass(frozen=True)
class PreparedSource:
    """A translation run's data as a prepared directory (``train --data-dir``): the tokenizers
    its ids were made with, and its pairs read through memory maps (what
    :class:`~transformer.training.text_inputs.TextSource` is for parallel text)."""

    prepared: PreparedData

    def tokenizers(self, cfg: TranslationTrainConfig) -> tuple[Tokenizer, Tokenizer]:
        """The tokenizers the directory's ids were made with."""
        return self.prepared.tokenizers()

    def check_tokenizers(self, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer, *,
                         where: str) -> None:
        """InputError when a model's tokenizers (from ``where``) are not the directory's."""
        check_tokenizers(self.prepared, src_tokenizer, tgt_tokenizer, where=where)

    def inputs(self, cfg: TranslationTrainConfig, *, src_tokenizer: Tokenizer,
               tgt_tokenizer: Tokenizer, max_len: int, rank: int, world_size: int,
               validation: bool) -> TranslationInputs:
        """:func:`prepared_inputs` of the directory (its ids are the tokenizers')."""
        return prepared_inputs(self.prepared, cfg, max_len=max_len, rank=rank,
                               world_size=world_size, validation=validation)


def check_tokenizers(prepared: PreparedData, src_tok: Any, tgt_tok: Any, *, where: str) -> None:
    """InputError when the model's tokenizers (from ``where``) are not the ones the ids were made
    with."""
    src, tgt = prepared.tokenizers()
    if (src.to_bytes(), tgt.to_bytes()) != (src_tok.to_bytes(), tgt_tok.to_bytes()):
        raise InputError(f"{prepared.root}: its ids were made with another tokenizer than {where}'s; "
                         f"prepare the data with --tokenizer-from {where}")


def prepared_inputs(prepared: PreparedData, cfg: TranslationTrainConfig, *, max_len: int,
                    rank: int, world_size: int, validation: bool) -> TranslationInputs:
    """The training epochs of ``prepared`` fitted to ``max_len`` positions (``cfg.on_long``), and
    with ``validation`` (rank 0) the validation batches and BLEU sample, as the text-file path
    makes them from the same pairs."""
    began = time.perf_counter()
    pairs = prepared.pairs("train", max_len=max_len, on_long=cfg.on_long)
    if len(pairs) == 0:
        raise InputError(f"{prepared.root}: no training pair fits max_len={max_len}")
    max_tokens = max(cfg.max_tokens, int(pairs.widths.max()))  # one pair always fits a batch
    data = MixedEpochs(pairs, weights=prepared.weights, collate=collate_pairs, max_tokens=max_tokens,
                       seed=cfg.seed, rank=rank, world_size=world_size)
    corpora = len(pairs.sizes)
    log.info("data: %s: %s training pairs in %d %s%s, %s tokens (%.1fs)", prepared.root,
             f"{len(pairs):,}", corpora, "corpus" if corpora == 1 else "corpora",
             f" mixed by weights {prepared.weights}" if prepared.weights else "",
             f"{int(pairs.lengths.sum()):,}", time.perf_counter() - began)
    inputs = TranslationInputs(data=data, train_pairs=len(pairs), record={
        "train": f"{prepared.root}/train", "valid": None, "data_dir": str(prepared.root),
        "manifest_sha256": prepared.manifest_sha256, "train_pairs": len(pairs), "valid_pairs": 0,
        "weights": prepared.weights, "tags": prepared.manifest.get("tags")})
    if prepared.has_split("valid"):
        inputs.record["valid"] = f"{prepared.root}/valid"
        valid = prepared.pairs("valid", max_len=max_len, on_long="truncate")
        inputs.record["valid_pairs"] = len(valid)
        if validation:
            sampler = TokenBatchSampler(valid.lengths, shuffle=False,
                                        max_tokens=max(max_tokens, 2 * cfg.max_tokens))
            inputs.valid_batches = [collate_pairs([valid[i] for i in idx]) for idx in sampler]
            if cfg.bleu_sample:
                index = range(len(valid))
                if cfg.bleu_sample < len(valid):  # the text path's sample (train_translation)
                    index = sorted(random.Random(cfg.seed).sample(range(len(valid)), cfg.bleu_sample))
                references = prepared.references("valid")
                inputs.bleu_sources = [valid[i][0] for i in index]
                inputs.bleu_references = [references[i] for i in index]
    return inputs

