"""Training a text classifier end to end: tokenizer, model, the shared Trainer, thresholds, model
directory.

    splits = corpus_splits("nsmc")                       # or file_splits(train_path, valid=...)
    cfg = classifier_config("nsmc-cpu")                  # transformer.config
    summary = train_classifier(splits, config=cfg, run_dir="runs/nsmc", recipe=..., data_info=...)

What it writes (the model directory of DESIGN.md): ``config.json`` with ``task:
"classification"``, the model and classifier shape, the label names, the multi-label decision
thresholds (tuned on the validation split; 0.5 without one), the training configuration and where
the data came from; ``model.safetensors`` (best by validation), ``tokenizer/``, ``labels.json``,
``checkpoint/``, ``metrics.jsonl`` and ``results.json`` (final figures on every split).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from transformer.atomic import atomic_write_text
from transformer.config.runs import ClassifierTrainConfig
from transformer.data.batching import collate_classification, encode_classification
from transformer.data.classification import ClassificationData
from transformer.data.classification_splits import SplitRecipe
from transformer.data.epochs import Epochs
from transformer.data.labels import LabelVocabulary
from transformer.errors import InputError
from transformer.model import TransformerClassifier
from transformer.model_dir import load_model_dir, save_model_dir
from transformer.precision import resolve_precision
from transformer.training.classification_task import ClassificationTask
from transformer.training.optimizer import build_optimizer
from transformer.training.rng import seed_everything
from transformer.training.run_lock import hold_run_dir
from transformer.training.schedule import LRSchedule, build_scheduler
from transformer.training.trainer import Trainer

log = logging.getLogger(__name__)

RESULTS_FILE = "results.json"




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
    init_from: str | Path | None = None,
) -> dict[str, Any]:
    """Train on ``splits["train"]``, select and tune on ``splits["valid"]`` (when present), then
    report every split with the best model. Returns the summary also written to ``results.json``.

    ``multi_label`` defaults to "some training text has other than one label". ``recipe`` and
    ``data_info`` (where the data came from) are stored in ``config.json`` for later evaluation.
    ``init_from`` (a translation model's directory) gives the tokenizer (its source side) and the
    encoder's and embeddings' first weights; ``config`` must have its encoder's shape
    (:func:`transformer.training.init_from.classifier_config_from` builds such a ``config``).
    """
    from transformer.data.tokenizer import Tokenizer
    from transformer.decoding.classifier import Classifier
    from transformer.evaluation.classifier import evaluate_classifier

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
    origin = None
    if init_from is not None:
        from transformer.training.init_from import init_encoder, read_origin

        origin = read_origin(init_from)
        tokenizer = origin.src_tokenizer
    else:
        tokenizer = Tokenizer.train(
            train_data.texts, vocab_size=config.vocab_size, model_type=config.tokenizer_type,
            character_coverage=config.character_coverage, sample_size=config.tokenizer_sample,
            seed=config.seed,
        )
    tokenizer_s = time.monotonic() - t0
    model_cfg = config.model_config(src_vocab_size=tokenizer.vocab_size)
    model = TransformerClassifier(model_cfg, num_labels=num_labels, pooling=config.pooling,
                                  multi_label=multi_label)
    if origin is not None:
        init_encoder(model, origin)
    model.to(device)
    precision = resolve_precision(config.precision, model=model, device=device, training=True)
    log.info("%s%s", precision.describe(),
             f"; {precision.probe.describe()}" if precision.probe is not None else "")
    if precision.warning:
        log.warning(precision.warning)
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
            kind="inverse_sqrt", warmup=config.warmup, peak_lr=config.lr, d_model=model_cfg.d_model))

    info = {
        "task": "classification",
        "classifier": {"num_labels": num_labels, "pooling": config.pooling, "multi_label": multi_label},
        "labels": list(label_names),
        "thresholds": None,
        "training": config.to_dict(),
        "precision": precision.to_dict(),
        "data": {**(data_info or {}), "recipe": recipe.to_dict() if recipe else None,
                 "sizes": {k: len(v) for k, v in splits.items()}},
    }
    if origin is not None:
        info["init_from"] = origin.record()

    def save_best(best_model: torch.nn.Module, evaluation: dict[str, float]) -> None:
        thresholds = task.thresholds if task.thresholds is not None else (
            np.full(num_labels, 0.5) if multi_label else None)
        info["thresholds"] = None if thresholds is None else [round(float(t), 4) for t in thresholds]
        info["best_validation"] = dict(evaluation)
        save_model_dir(run_dir, best_model, config=info, src_tokenizer=tokenizer, tgt_tokenizer=tokenizer)
        LabelVocabulary(label_names).save(run_dir)

    trainer = Trainer(
        model=model, task=task, optimizer=optimizer, scheduler=scheduler, train_data=data,
        config=config.loop_config(precision.precision),
        run_dir=run_dir, save_best=save_best, device=device, progress=progress,
    )
    result = trainer.fit()
    train_s = result.elapsed_s

    classifier = Classifier(load_model_dir(run_dir, device=device))
    figures: dict[str, Any] = {}
    for name, split in splits.items():
        if name == "train":
            continue
        evaluation = evaluate_classifier(classifier, split)
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
        "precision": precision.precision,
        "thresholds": info["thresholds"],
        "splits": figures,
    }
    atomic_write_text(run_dir / RESULTS_FILE, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def train_classifier_run(
    config: ClassifierTrainConfig,
    *,
    run_dir: str | Path,
    overwrite: bool = False,
    preset: str | None = None,
    data: str | None = None,
    train: str | None = None,
    valid: str | None = None,
    test: str | None = None,
    columns: dict[str, Any] | None = None,
    split_seed: int | None = None,
    multi_label: bool | None = None,
    device: str | torch.device = "cpu",
    progress: bool = False,
    init_from: str | Path | None = None,
) -> dict[str, Any]:
    """``transformer classify train``: refuse (or with ``overwrite`` clear) a model already in
    ``run_dir``, read the splits (a corpus by name, or files; ``columns`` holds text_column,
    label_column, format and label_separator) and :func:`train_classifier` on them (from
    ``init_from``'s encoder when given)."""
    run_dir = Path(run_dir)
    with hold_run_dir(run_dir):
        return _train_classifier_run(
            config, run_dir=run_dir, overwrite=overwrite, preset=preset, data=data, train=train,
            valid=valid, test=test, columns=columns, split_seed=split_seed,
            multi_label=multi_label, device=device, progress=progress, init_from=init_from)


def _train_classifier_run(config: ClassifierTrainConfig, *, run_dir: Path, overwrite: bool,
                          preset: str | None, data: str | None, train: str | None,
                          valid: str | None, test: str | None, columns: dict[str, Any] | None,
                          split_seed: int | None, multi_label: bool | None,
                          device: str | torch.device, progress: bool,
                          init_from: str | Path | None = None) -> dict[str, Any]:
    """:func:`train_classifier_run` once the run directory's lock is held."""
    import shutil

    from transformer.data.classification_splits import DEFAULT_SEED, resolve_splits

    if init_from is not None and Path(init_from).resolve() == run_dir.resolve():
        raise InputError(f"{run_dir}: --init-from and --out are the same directory")
    if (run_dir / "config.json").exists():
        if not overwrite:
            raise InputError(f"{run_dir} already holds a model; pass --overwrite to replace it")
        for name in ("metrics.jsonl", RESULTS_FILE):
            (run_dir / name).unlink(missing_ok=True)
        shutil.rmtree(run_dir / "checkpoint", ignore_errors=True)
    splits, recipe, info = resolve_splits(
        data=data, train=train, valid=valid, test=test, **(columns or {}),
        seed=split_seed if split_seed is not None else DEFAULT_SEED,
    )
    return train_classifier(splits, config=config, run_dir=run_dir, multi_label=multi_label,
                            recipe=recipe, data_info={**info, "preset": preset}, device=device,
                            progress=progress, init_from=init_from)
