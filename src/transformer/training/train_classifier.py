"""Training a text classifier end to end: tokenizer, model, the shared Trainer, thresholds, model
directory.

    splits = corpus_splits("nsmc")                       # or file_splits(train_path, valid=...)
    cfg = ClassifierTrainConfig.preset("nsmc-cpu")
    summary = train_classifier(splits, config=cfg, run_dir="runs/nsmc", recipe=..., data_info=...)

What it writes (the model directory of DESIGN.md): ``config.json`` with ``task:
"classification"``, the model and classifier shape, the label names, the multi-label decision
thresholds (tuned on the validation split; 0.5 without one), the training configuration and where
the data came from; ``model.safetensors`` (best by validation), ``tokenizer/``, ``labels.json``,
``checkpoint/``, ``metrics.jsonl`` and ``results.json`` (final figures on every split).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from transformer.atomic import atomic_write_text
from transformer.config import ModelConfig
from transformer.config.choices import CLASSIFIER_SCHEDULES as SCHEDULES
from transformer.config.choices import POS_WEIGHTS
from transformer.data.batching import collate_classification, encode_classification
from transformer.data.classification import ClassificationData
from transformer.data.classification_splits import SplitRecipe
from transformer.data.epochs import Epochs
from transformer.data.labels import LabelVocabulary
from transformer.errors import InputError
from transformer.model import TransformerClassifier
from transformer.model_dir import load_model_dir, save_model_dir
from transformer.training.checkpoint import seed_everything
from transformer.training.classification_task import ClassificationTask
from transformer.training.optimizer import build_optimizer
from transformer.training.schedule import LRSchedule, build_scheduler
from transformer.training.trainer import TrainConfig, Trainer

log = logging.getLogger(__name__)

RESULTS_FILE = "results.json"


@dataclass(frozen=True)
class ClassifierTrainConfig:
    """Tokenizer, model and optimisation settings of a classifier run (data is chosen apart).

    ``max_len`` is the model's positions (a CLS vector takes one); ``batch_tokens`` bounds the
    padded positions of a batch. ``pos_weight="sqrt"`` weighs each label's positive BCE term by
    sqrt(negatives / positives) (at most ``max_pos_weight``), which helps rare labels of a
    multi-label task. The learning rate warms up linearly for ``warmup`` updates to ``lr``, then
    decays as 1/sqrt(step) (``schedule="inverse_sqrt"``) or linearly to 0 at the last planned update
    (``"linear"``: ``max_steps``, else ``epochs`` times the batches of an epoch; ``minutes`` may stop
    the run before).
    """

    # tokenizer
    vocab_size: int = 8000
    tokenizer_type: str = "unigram"
    character_coverage: float = 0.9995
    tokenizer_sample: int | None = 300_000
    # model
    d_model: int = 256
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 1024
    dropout: float = 0.1
    attention_dropout: float = 0.0
    max_len: int = 128
    pooling: str = "mean"
    norm_first: bool = False
    activation: str = "relu"
    # optimisation
    lr: float = 1e-3
    warmup: int = 500
    schedule: str = "inverse_sqrt"
    weight_decay: float = 0.0
    batch_tokens: int = 4096
    max_sentences: int | None = None
    epochs: int | None = 3
    max_steps: int | None = None
    minutes: float | None = None
    eval_every: int = 500
    patience: int | None = None
    clip_norm: float | None = 1.0
    label_smoothing: float = 0.0
    pos_weight: str = "none"
    max_pos_weight: float = 30.0
    metric: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.schedule == "linear" and self.epochs is None and self.max_steps is None:
            raise ValueError("the linear schedule needs epochs or max_steps to plan its decay")
        if self.pos_weight not in POS_WEIGHTS:
            raise ValueError(f"pos_weight must be one of {POS_WEIGHTS}, got {self.pos_weight!r}")
        for name in ("vocab_size", "batch_tokens", "warmup"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.max_len > self.batch_tokens:
            raise ValueError(f"batch_tokens={self.batch_tokens} is below max_len={self.max_len}")
        self.model_config(vocab_size=self.vocab_size)  # validates the shape

    def replace(self, **changes: Any) -> ClassifierTrainConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def model_config(self, *, vocab_size: int) -> ModelConfig:
        return ModelConfig(
            src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=self.d_model,
            num_heads=self.num_heads, num_encoder_layers=self.num_layers, num_decoder_layers=0,
            d_ff=self.d_ff, dropout=self.dropout, attention_dropout=self.attention_dropout,
            max_len=self.max_len, norm_first=self.norm_first, activation=self.activation,
        )

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ClassifierTrainConfig:
        """A preset of :data:`CLASSIFIER_PRESETS` with ``overrides`` applied."""
        if name not in CLASSIFIER_PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose from {', '.join(CLASSIFIER_PRESETS)}")
        return cls(**{**CLASSIFIER_PRESETS[name]["config"], **overrides})


# name -> {"data": corpus the preset is for (or None), "config": ClassifierTrainConfig fields}
CLASSIFIER_PRESETS: dict[str, dict[str, Any]] = {
    # a few seconds on any data: for smoke tests
    "tiny": {"data": None, "config": dict(
        vocab_size=500, tokenizer_type="bpe", d_model=32, num_heads=2, num_layers=1, d_ff=64, max_len=64,
        batch_tokens=1024, epochs=2, warmup=20, eval_every=100, tokenizer_sample=20_000)},
    # Korean movie-review sentiment on a 2-core CPU in at most 30 minutes: 4 epochs with a linear
    # decay (about 5 minutes an epoch on one busy core), cut at 27 minutes of training on a slower
    # machine. A 16k BPE vocabulary beat 8k by 0.5 points in 2-epoch runs.
    "nsmc-cpu": {"data": "nsmc", "config": dict(
        vocab_size=16000, tokenizer_type="bpe", character_coverage=0.9995,
        d_model=256, num_heads=4, num_layers=2, d_ff=1024, dropout=0.1, max_len=96,
        lr=1.5e-3, warmup=200, schedule="linear", batch_tokens=4096, epochs=4, minutes=27.0,
        eval_every=300)},
    # 28-emotion multi-label Reddit comments on a 2-core CPU in at most 30 minutes: 4 epochs with a
    # linear decay (under 2 minutes an epoch on one busy core; validation macro-F1 peaks near
    # epoch 2.5), sqrt positive weights for the rare emotions, thresholds tuned per label.
    "goemotions-cpu": {"data": "goemotions", "config": dict(
        vocab_size=8000, tokenizer_type="bpe", character_coverage=1.0,
        d_model=256, num_heads=4, num_layers=2, d_ff=1024, dropout=0.1, max_len=64,
        lr=1e-3, warmup=300, schedule="linear", batch_tokens=2048, epochs=4, minutes=27.0,
        eval_every=300, pos_weight="sqrt")},
}


def positive_weights(labels: list[list[int]], *, num_labels: int, cap: float) -> torch.Tensor:
    """Per label sqrt(negatives / positives), clipped to [1, cap] (cap for a label never seen)."""
    counts = np.zeros(num_labels)
    for row in labels:
        counts[list(row)] += 1
    n = len(labels)
    ratio = np.where(counts > 0, (n - counts) / np.maximum(counts, 1), cap**2)
    return torch.tensor(np.clip(np.sqrt(ratio), 1.0, cap), dtype=torch.float32)


def train_classifier(
    splits: dict[str, ClassificationData],
    *,
    config: ClassifierTrainConfig,
    run_dir: str | Path,
    multi_label: bool | None = None,
    recipe: SplitRecipe | None = None,
    data_info: dict[str, Any] | None = None,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> dict[str, Any]:
    """Train on ``splits["train"]``, select and tune on ``splits["valid"]`` (when present), then
    report every split with the best model. Returns the summary also written to ``results.json``.

    ``multi_label`` defaults to "some training text has other than one label". ``recipe`` and
    ``data_info`` (where the data came from) are stored in ``config.json`` for later evaluation.
    """
    from transformer.data.tokenizer import Tokenizer
    from transformer.decoding.classifier import Classifier

    started = time.monotonic()
    run_dir = Path(run_dir)
    train_data = splits["train"]
    valid_data = splits.get("valid")
    label_names = tuple(train_data.label_names)
    num_labels = len(label_names)
    if multi_label is None:
        multi_label = train_data.multi_label
    if not multi_label and num_labels < 2:
        raise InputError(f"{train_data.name}: a single-label classifier needs at least 2 labels, "
                         f"found {num_labels}")
    seed_everything(config.seed)

    t0 = time.monotonic()
    tokenizer = Tokenizer.train(
        train_data.texts, vocab_size=config.vocab_size, model_type=config.tokenizer_type,
        character_coverage=config.character_coverage, sample_size=config.tokenizer_sample,
        seed=config.seed,
    )
    tokenizer_s = time.monotonic() - t0
    model_cfg = config.model_config(vocab_size=tokenizer.vocab_size)
    model = TransformerClassifier(model_cfg, num_labels=num_labels, pooling=config.pooling,
                                  multi_label=multi_label)
    model.to(device)
    log.info("classifier: %d labels (%s), %s parameters, vocabulary %d", num_labels,
             "multi-label" if multi_label else "single-label", f"{model.num_parameters():,}",
             tokenizer.vocab_size)

    encoded = encode_classification(train_data, tokenizer, max_len=model.max_tokens)
    ids = [item[0] for item in encoded]
    labels = [item[1] for item in encoded]
    valid_ids: list[list[int]] = []
    valid_labels: list[list[int]] = []
    if valid_data is not None:
        valid_enc = encode_classification(valid_data, tokenizer, max_len=model.max_tokens)
        valid_ids = [item[0] for item in valid_enc]
        valid_labels = [item[1] for item in valid_enc]
    if not multi_label:
        bad = next((i for i, row in enumerate(labels) if len(row) != 1), None)
        if bad is not None:
            raise InputError(f"{train_data.name}: text {bad + 1} has {len(labels[bad])} labels but "
                             "the classifier is single-label (use multi-label)")
    pos_weight = None
    if multi_label and config.pos_weight == "sqrt":
        pos_weight = positive_weights(labels, num_labels=num_labels, cap=config.max_pos_weight)

    extra_positions = 1 if config.pooling == "cls" else 0  # the CLS vector's position
    data = Epochs(
        list(zip(ids, labels, strict=True)),
        widths=[max(len(row), 1) + extra_positions for row in ids],
        collate=functools.partial(collate_classification, num_labels=num_labels,
                                  multi_label=multi_label, pad_id=model_cfg.pad_id),
        max_tokens=config.batch_tokens, max_sentences=config.max_sentences, seed=config.seed,
    )
    task = ClassificationTask(
        num_labels=num_labels, multi_label=multi_label, valid_ids=valid_ids,
        valid_labels=valid_labels, metric=config.metric, label_smoothing=config.label_smoothing,
        pos_weight=pos_weight, pad_id=model_cfg.pad_id,
    )
    optimizer = build_optimizer(model, weight_decay=config.weight_decay)
    if config.schedule == "linear":
        total = config.max_steps or (config.epochs or 1) * len(data)
        scheduler = build_scheduler(optimizer, schedule=LRSchedule(
            kind="linear", warmup=min(config.warmup, total), peak_lr=config.lr, total=total))
    else:
        scheduler = build_scheduler(optimizer, schedule=LRSchedule(
            kind="inverse_sqrt", warmup=config.warmup, peak_lr=config.lr, d_model=config.d_model))

    info = {
        "task": "classification",
        "classifier": {"num_labels": num_labels, "pooling": config.pooling, "multi_label": multi_label},
        "labels": list(label_names),
        "thresholds": None,
        "training": config.to_dict(),
        "data": {**(data_info or {}), "recipe": recipe.to_dict() if recipe else None,
                 "sizes": {k: len(v) for k, v in splits.items()}},
    }

    def save_best(best_model: torch.nn.Module, evaluation: dict[str, float]) -> None:
        thresholds = task.thresholds if task.thresholds is not None else (
            np.full(num_labels, 0.5) if multi_label else None)
        info["thresholds"] = None if thresholds is None else [round(float(t), 4) for t in thresholds]
        info["best_validation"] = dict(evaluation)
        save_model_dir(run_dir, best_model, config=info, src_tokenizer=tokenizer, tgt_tokenizer=tokenizer)
        LabelVocabulary(label_names).save(run_dir)

    trainer = Trainer(
        model=model, task=task, optimizer=optimizer, scheduler=scheduler, train_data=data,
        config=TrainConfig(
            epochs=config.epochs, max_steps=config.max_steps, minutes=config.minutes,
            clip_norm=config.clip_norm, eval_every=config.eval_every,
            log_every=min(100, config.eval_every or 100), patience=config.patience, seed=config.seed,
        ),
        run_dir=run_dir, save_best=save_best, device=device, progress=progress,
    )
    result = trainer.fit()
    train_s = result.elapsed_s

    classifier = Classifier(load_model_dir(run_dir, device=device))
    figures: dict[str, Any] = {}
    for name, split in splits.items():
        if name == "train":
            continue
        evaluation = classifier.evaluate(split)
        figures[name] = {"accuracy": evaluation.report.accuracy, "micro_f1": evaluation.report.micro_f1,
                         "macro_f1": evaluation.report.macro_f1,
                         "num_examples": evaluation.report.num_examples,
                         "num_truncated": evaluation.num_truncated}
    summary = {
        "run_dir": str(run_dir),
        "multi_label": multi_label,
        "num_labels": num_labels,
        "parameters": model.num_parameters(),
        "vocab_size": tokenizer.vocab_size,
        "train_examples": len(ids),
        "train_truncated": encoded.num_truncated,
        "steps": result.steps,
        "epochs": result.epochs,
        "stopped_by": result.stopped_by,
        "best_step": result.best_step,
        "tokenizer_s": round(tokenizer_s, 1),
        "train_s": round(train_s, 1),
        "total_s": round(time.monotonic() - started, 1),
        "tokens_per_s": round(result.tokens_per_s),
        "thresholds": info["thresholds"],
        "splits": figures,
    }
    atomic_write_text(run_dir / RESULTS_FILE, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary
