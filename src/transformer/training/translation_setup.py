"""Where a translation run's tokenizers and model come from, the first stage of
:func:`~transformer.training.train_translation.train_translation`:

- a resumed run: its own (``RUN_DIR/tokenizer/`` and ``config.json``; the weights come with the
  checkpoint);
- ``init_from``: another model directory's tokenizers and weights (a run, or an imported model);
- a prepared data directory: the tokenizers its ids were made with, and a new model;
- text: tokenizers trained on the training text (by rank 0, sent to every rank), and a new model.

A new model's initial weights depend on the run's seed alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from transformer.config.runs import TranslationTrainConfig
from transformer.data.parallel import ParallelCorpus
from transformer.data.prepared.directory import PreparedData
from transformer.data.tokenizer import Tokenizer
from transformer.data.tokenizer_pair import train_tokenizers
from transformer.errors import InputError
from transformer.model import Transformer
from transformer.model_dir import (
    WEIGHTS_FILE,
    check_vocabulary,
    load_tokenizer_dir,
    read_record,
)
from transformer.training import distributed as D
from transformer.training.data_dir_inputs import check_tokenizers
from transformer.training.rng import seed_everything


@dataclass
class TranslationModel:
    """A run's model and the tokenizers it reads and writes with; ``extra_config``: what
    ``config.json`` records of where they came from (``init_from``)."""

    model: Transformer
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    extra_config: dict[str, Any]


def setup_model(cfg: TranslationTrainConfig, *, run_dir: Path, resume: bool,
                init_from: Path | str | None, prepared: PreparedData | None,
                splits: dict[str, ParallelCorpus] | None) -> TranslationModel:
    """The tokenizers and model of a run: the run's own on ``resume`` (weights come with the
    checkpoint), ``init_from``'s (its weights loaded), the tokenizers the ``prepared`` ids were made
    with, or tokenizers trained on ``splits["train"]``; a new model's weights depend on
    ``cfg.seed`` alone. The prepared ids must have been made with the tokenizers chosen."""
    if resume:
        built = _model_of_run(run_dir)
    elif init_from is not None:
        built = _model_from_origin(cfg, init_from)
    else:
        if prepared is not None:  # the tokenizer the ids were made with
            src_tok, tgt_tok = prepared.tokenizers()
        else:
            assert splits is not None
            src_tok, tgt_tok = _train_tokenizers(cfg, splits["train"])
        seed_everything(cfg.seed)  # the model's initial weights depend on the seed alone
        built = TranslationModel(build_translation_model(cfg, src_tok, tgt_tok), src_tok, tgt_tok, {})
    if prepared is not None:
        check_tokenizers(prepared, built.src_tokenizer, built.tgt_tokenizer,
                         where=str(init_from or run_dir))
    return built


def _model_of_run(run_dir: Path) -> TranslationModel:
    """The model and tokenizers of the run in ``run_dir``, to resume (its weights come from the
    checkpoint, whose shapes are compared with the record before the model is built)."""
    from transformer.model_dir import build_checked
    from transformer.training.checkpoint import CHECKPOINT_DIR

    src_tok, tgt_tok = load_tokenizer_dir(run_dir)
    # a translation run's config.json: resume checks its task, auto-resume its configuration
    weights = run_dir / CHECKPOINT_DIR / WEIGHTS_FILE
    model = cast(Transformer, build_checked(read_record(run_dir), weights))
    check_vocabulary(model.config, src_tok, tgt_tok, where=str(run_dir / "tokenizer"))
    return TranslationModel(model, src_tok, tgt_tok, {})


def _model_from_origin(cfg: TranslationTrainConfig, init_from: Path | str) -> TranslationModel:
    """A model of ``cfg``'s shape holding the weights of the model in ``init_from``, with its
    tokenizers."""
    from transformer.training.init_from import load_origin, read_origin

    origin = read_origin(init_from)
    seed_everything(cfg.seed)
    model = build_translation_model(cfg, origin.src_tokenizer, origin.tgt_tokenizer)
    load_origin(model, origin)
    return TranslationModel(model, origin.src_tokenizer, origin.tgt_tokenizer,
                            {"init_from": origin.record()})


def _train_tokenizers(cfg: TranslationTrainConfig, train: ParallelCorpus) -> tuple[Tokenizer, Tokenizer]:
    """SentencePiece tokenizers trained on ``train`` by rank 0, the same on every rank."""
    info = D.current()
    pair = None
    if info.is_main:
        pair = train_tokenizers(train.src, train.tgt, vocab_size=cfg.vocab_size, joint=cfg.joint,
                                model_type=cfg.model_type, byte_fallback=cfg.byte_fallback,
                                character_coverage=cfg.character_coverage, seed=cfg.seed)
    if info.is_distributed:
        return _broadcast_tokenizers(pair)
    assert pair is not None
    return pair


def _broadcast_tokenizers(pair: tuple[Tokenizer, Tokenizer] | None) -> tuple[Tokenizer, Tokenizer]:
    """Rank 0's tokenizers on every rank (sent as SentencePiece model bytes)."""
    protos = None if pair is None else (pair[0].to_bytes(), pair[1].to_bytes())
    protos = D.broadcast_object(protos)
    src = Tokenizer.from_bytes(protos[0])
    return (src, src) if protos[1] == protos[0] else (src, Tokenizer.from_bytes(protos[1]))


def build_translation_model(cfg: TranslationTrainConfig, src_tok: Tokenizer, tgt_tok: Tokenizer) -> Transformer:
    """The model of ``cfg`` with the tokenizers' real vocabulary sizes."""
    try:
        model_cfg = cfg.model_config(src_vocab_size=src_tok.vocab_size,
                                     tgt_vocab_size=tgt_tok.vocab_size)
    except (TypeError, ValueError) as err:
        raise InputError(f"bad model configuration: {err}") from None
    return Transformer(model_cfg)
