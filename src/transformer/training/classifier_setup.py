"""Where a classifier run's labels, tokenizer and model come from, the first stages of
:func:`~transformer.training.train_classifier.train_classifier` (what
:mod:`~transformer.training.translation_setup` is for a translation run):

- a resumed run: its own (the labels of ``config.json``, ``RUN_DIR/tokenizer/``; the weights come
  with the checkpoint);
- ``init_from``: a translation model's source tokenizer, its embeddings and encoder;
- else: a SentencePiece tokenizer trained on the training texts and a new model, whose initial
  weights depend on the run's seed alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from transformer.config.runs import ClassifierTrainConfig
from transformer.data.classification import ClassificationData
from transformer.data.tokenizer import Tokenizer
from transformer.errors import InputError
from transformer.model import TransformerClassifier
from transformer.model_dir import CONFIG_FILE, RunRecord


@dataclass(frozen=True)
class Labels:
    """The label set of a run: the names (index order) and whether a text may have several."""

    names: tuple[str, ...]
    multi_label: bool

    @property
    def count(self) -> int:
        return len(self.names)


def setup_labels(train: ClassificationData, *, multi_label: bool | None,
                 stored: RunRecord | None = None) -> Labels:
    """The labels of the training data; ``multi_label`` defaults to whether some training text
    has other than one label. InputError for a single-label task of fewer than 2 labels, and for
    a resumed run (``stored``: its record) whose data now has other labels than it had."""
    names = tuple(train.label_names)
    if stored is not None:
        if names != tuple(stored.labels):
            raise InputError(f"{train.name}: its labels ({', '.join(names)}) are not those the "
                             f"run was trained with ({', '.join(stored.labels)}, in "
                             f"{stored.source}); resume it on the same data")
        assert stored.classifier is not None
        multi_label = stored.classifier.multi_label
    if multi_label is None:
        multi_label = train.multi_label
    if not multi_label and len(names) < 2:
        raise InputError(f"{train.name}: a single-label classifier needs at least 2 labels, "
                         f"found {len(names)}")
    return Labels(names, multi_label)


@dataclass
class ClassifierModel:
    """A run's classifier and its tokenizer; ``extra_config``: what ``config.json`` records of
    where they came from (``init_from``); ``tokenizer_s``: the seconds the tokenizer took."""

    model: TransformerClassifier
    tokenizer: Tokenizer
    extra_config: dict[str, Any]
    tokenizer_s: float


def setup_model(config: ClassifierTrainConfig, train: ClassificationData, *, labels: Labels,
                init_from: str | Path | None,
                resumed: tuple[Path, RunRecord] | None = None) -> ClassifierModel:
    """A SentencePiece tokenizer trained on ``train``'s texts (by rank 0, sent to every rank) and
    a new classifier; or with ``init_from`` that translation model's source tokenizer, and its
    embeddings and encoder copied into the classifier; or the model and tokenizer of the
    ``resumed`` run (its directory and record; its weights come with the checkpoint)."""
    if resumed is not None:
        return _model_of_run(*resumed)
    began = time.monotonic()
    origin = None
    if init_from is not None:
        from transformer.training.init_from import read_origin

        origin = read_origin(init_from)
        tokenizer = origin.src_tokenizer
    else:
        tokenizer = _train_tokenizer(config, train)
    tokenizer_s = time.monotonic() - began
    model = TransformerClassifier(config.model_config(src_vocab_size=tokenizer.vocab_size),
                                  num_labels=labels.count, pooling=config.pooling,
                                  multi_label=labels.multi_label)
    if origin is None:
        return ClassifierModel(model, tokenizer, {}, tokenizer_s)
    from transformer.training.init_from import init_encoder

    init_encoder(model, origin)
    return ClassifierModel(model, tokenizer, {"init_from": origin.record()}, tokenizer_s)


def _train_tokenizer(config: ClassifierTrainConfig, train: ClassificationData) -> Tokenizer:
    """A SentencePiece tokenizer of ``train``'s texts, trained by rank 0, the same on every rank."""
    from transformer.training import distributed as D

    info = D.current()
    proto = None
    if info.is_main:
        tokenizer = Tokenizer.train(
            train.texts, vocab_size=config.vocab_size, model_type=config.tokenizer_type,
            character_coverage=config.character_coverage, sample_size=config.tokenizer_sample,
            seed=config.seed,
        )
        if not info.is_distributed:
            return tokenizer
        proto = tokenizer.to_bytes()
    return Tokenizer.from_bytes(D.broadcast_object(proto))


def _model_of_run(run_dir: Path, record: RunRecord) -> ClassifierModel:
    """The classifier and tokenizer of the run in ``run_dir`` (``record``: its config.json), to
    resume: the model is built from the record once the checkpoint's shapes were compared with
    it (its weights are loaded with the rest of the checkpoint)."""
    from transformer.model_dir import (
        WEIGHTS_FILE,
        build_checked,
        check_vocabulary,
        load_tokenizer_dir,
    )
    from transformer.training.checkpoint import CHECKPOINT_DIR

    if record.classifier is None:
        raise InputError(f"{run_dir / CONFIG_FILE}: not a classifier run")
    tokenizer, _ = load_tokenizer_dir(run_dir)
    model = cast(TransformerClassifier,
                 build_checked(record, run_dir / CHECKPOINT_DIR / WEIGHTS_FILE))
    check_vocabulary(model.config, tokenizer, None, where=str(run_dir / "tokenizer"))
    return ClassifierModel(model, tokenizer, {}, 0.0)
