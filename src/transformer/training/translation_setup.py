"""Where a translation run's tokenizers and model come from, the first stage of
:func:`~transformer.training.train_translation.train_translation`:

- a resumed run: its own (``RUN_DIR/tokenizer/`` and ``config.json``; the weights come with the
  checkpoint);
- ``init_from``: another model directory's tokenizers and weights (a run, or an imported model);
- else the data's (:func:`translation_source`, chosen once: a prepared directory or text): the
  tokenizers a prepared directory's ids were made with, or tokenizers trained on the training
  text (by rank 0, sent to every rank), and a new model.

A new model's initial weights depend on the run's seed alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from transformer.config.runs import TranslationTrainConfig
from transformer.data.parallel import ParallelCorpus
from transformer.data.tokenizer import Tokenizer
from transformer.errors import InputError
from transformer.model import Transformer
from transformer.model_dir import WEIGHTS_FILE, RunRecord, check_vocabulary, load_tokenizer_dir
from transformer.training.rng import seed_everything
from transformer.training.text_inputs import TextSource, TranslationInputs, read_splits


class TranslationSource(Protocol):
    """Where a translation run's data comes from, chosen once (:func:`translation_source`):
    :class:`~transformer.training.text_inputs.TextSource` or
    :class:`~transformer.training.data_dir_inputs.PreparedSource`."""

    def tokenizers(self, cfg: TranslationTrainConfig) -> tuple[Tokenizer, Tokenizer]:
        """The tokenizers a new model of ``cfg`` reads and writes with."""
        ...

    def check_tokenizers(self, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer, *,
                         where: str) -> None:
        """InputError when the data cannot be read with a model's tokenizers (from ``where``)."""
        ...

    def inputs(self, cfg: TranslationTrainConfig, *, src_tokenizer: Tokenizer,
               tgt_tokenizer: Tokenizer, max_len: int, rank: int, world_size: int,
               validation: bool) -> TranslationInputs:
        """This rank's training batches and, with ``validation``, the validation batches and
        BLEU sample, fitted to ``max_len`` positions."""
        ...


def translation_source(cfg: TranslationTrainConfig, *,
                       splits: dict[str, ParallelCorpus] | None = None,
                       resumed: RunRecord | None = None) -> TranslationSource:
    """The run's data: ``cfg.data_dir`` (on resume, the manifest the ``resumed`` run started
    with), else the text ``splits`` given, else the text ``cfg`` names."""
    if cfg.data_dir is not None:
        from transformer.training.data_dir_inputs import open_prepared

        return open_prepared(cfg, resumed=resumed)
    return TextSource(splits if splits is not None else read_splits(cfg))


@dataclass
class TranslationModel:
    """A run's model and the tokenizers it reads and writes with; ``extra_config``: what
    ``config.json`` records of where they came from (``init_from``)."""

    model: Transformer
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    extra_config: dict[str, Any]


def setup_model(cfg: TranslationTrainConfig, *, run_dir: Path, resumed: RunRecord | None,
                init_from: Path | str | None, source: TranslationSource) -> TranslationModel:
    """The tokenizers and model of a run: the ``resumed`` run's own (its record; the weights come
    with the checkpoint), ``init_from``'s (its weights loaded), or the ``source``'s tokenizers
    and a new model whose weights depend on ``cfg.seed`` alone. The source must be readable with
    the tokenizers chosen."""
    if resumed is not None:
        built = _model_of_run(run_dir, resumed)
    elif init_from is not None:
        built = _model_from_origin(cfg, init_from)
    else:
        src_tok, tgt_tok = source.tokenizers(cfg)
        seed_everything(cfg.seed)  # the model's initial weights depend on the seed alone
        built = TranslationModel(build_translation_model(cfg, src_tok, tgt_tok), src_tok, tgt_tok, {})
    source.check_tokenizers(built.src_tokenizer, built.tgt_tokenizer, where=str(init_from or run_dir))
    return built


def _model_of_run(run_dir: Path, record: RunRecord) -> TranslationModel:
    """The model and tokenizers of the run in ``run_dir`` (``record``: its config.json), to
    resume (its weights come from the checkpoint, whose shapes are compared with the record
    before the model is built)."""
    from transformer.model_dir import build_checked
    from transformer.training.checkpoint import CHECKPOINT_DIR

    src_tok, tgt_tok = load_tokenizer_dir(run_dir)
    weights = run_dir / CHECKPOINT_DIR / WEIGHTS_FILE
    model = cast(Transformer, build_checked(record, weights))
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


def build_translation_model(cfg: TranslationTrainConfig, src_tok: Tokenizer, tgt_tok: Tokenizer) -> Transformer:
    """The model of ``cfg`` with the tokenizers' real vocabulary sizes."""
    try:
        model_cfg = cfg.model_config(src_vocab_size=src_tok.vocab_size,
                                     tgt_vocab_size=tgt_tok.vocab_size)
    except (TypeError, ValueError) as err:
        raise InputError(f"bad model configuration: {err}") from None
    return Transformer(model_cfg)
