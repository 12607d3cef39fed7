"""Training a translation model end to end: data, tokenizers, model, the Trainer, the model directory.

    cfg = translation_config("small", {"data": "multi30k", "minutes": 30})
    summary = train_translation(cfg, run_dir="runs/m30k", progress=True)
    summary = resume_translation("runs/m30k", minutes=60)     # continue exactly where it stopped

What it writes into the run directory (DESIGN.md): ``config.json`` (model, tokenizer and training
configuration, where the data came from), ``model.safetensors`` (best by validation BLEU),
``tokenizer/``, ``checkpoint/`` (exact resume) and ``metrics.jsonl``. Under ``torchrun`` every rank
trains on its shard of the batches and rank 0 alone writes.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from transformer.config.runs import RESUME_FIELDS, TranslationTrainConfig
from transformer.data.batch import Batch
from transformer.data.batching import collate_pairs, encode_pairs
from transformer.data.epochs import Epochs
from transformer.data.parallel import ParallelCorpus
from transformer.data.sampler import TokenBatchSampler
from transformer.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from transformer.data.tokenizer_pair import train_tokenizers
from transformer.errors import InputError
from transformer.model import Transformer
from transformer.model_dir import (
    CONFIG_FILE,
    check_vocabulary,
    load_tokenizer_dir,
    read_config,
    save_model_dir,
)
from transformer.precision import resolve_precision
from transformer.training import distributed as D
from transformer.training.checkpoint import has_checkpoint
from transformer.training.optimizer import build_optimizer
from transformer.training.prepared_inputs import check_tokenizers, open_prepared, prepared_inputs
from transformer.training.rng import seed_everything
from transformer.training.run_lock import hold_run_dir
from transformer.training.schedule import LRSchedule, build_scheduler
from transformer.training.trainer import Trainer, TrainResult
from transformer.training.translation_task import TranslationTask

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


def _stage(name: str, began: float, what: str) -> None:
    """One log line per data stage: what it made and how long it took."""
    log.info("data: %s: %s (%.1fs)", name, what, time.perf_counter() - began)


def _bleu_sample(corpus: ParallelCorpus, k: int, seed: int) -> tuple[list[str], list[str]]:
    """A fixed random sample of ``k`` validation pairs, in corpus order."""
    index = range(len(corpus))
    if k < len(corpus):
        index = sorted(random.Random(seed).sample(range(len(corpus)), k))
    return [corpus.src[i] for i in index], [corpus.tgt[i] for i in index]


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


def train_translation(
    cfg: TranslationTrainConfig,
    *,
    run_dir: Path | str,
    splits: dict[str, ParallelCorpus] | None = None,
    device: str = "auto",
    progress: bool = False,
    resume: bool = False,
    extra_config: dict[str, Any] | None = None,
    init_from: Path | str | None = None,
) -> dict[str, Any]:
    """Train (or with ``resume`` continue) a translation model into ``run_dir``; return a summary.

    ``splits`` ({"train", "valid"} corpora) replaces loading the data ``cfg`` names. With
    ``resume`` the tokenizers and model come from ``run_dir`` and training continues from its
    checkpoint. ``init_from`` (a model directory: a run, or an imported model) starts from its
    weights and tokenizers with a fresh optimizer and schedule; ``cfg`` must have its shape
    (:func:`transformer.training.init_from.translation_config_from` builds such a ``cfg``).
    ``extra_config`` is stored in ``config.json`` beside the training configuration.
    """
    run_dir = Path(run_dir)
    info, dev = D.init_distributed(device=device)
    seed_everything(cfg.seed)
    prepared = open_prepared(cfg, run_dir=run_dir, resume=resume)  # None unless cfg.data_dir
    if splits is None and prepared is None:
        began = time.perf_counter()
        splits = load_splits(cfg)
        _stage("read", began, ", ".join(f"{name} {len(corpus):,} pairs"
                                         for name, corpus in splits.items()))
    train, valid = (splits["train"], splits.get("valid")) if splits is not None else (None, None)

    if resume:
        src_tok, tgt_tok = load_tokenizer_dir(run_dir)
        stored = read_config(run_dir)
        from transformer.model_dir import build_model

        model = build_model(stored, source=str(run_dir / CONFIG_FILE))
        check_vocabulary(model.config, src_tok, tgt_tok, where=str(run_dir / "tokenizer"))
    elif init_from is not None:
        from transformer.training.init_from import load_origin, read_origin

        origin = read_origin(init_from)
        src_tok, tgt_tok = origin.src_tokenizer, origin.tgt_tokenizer
        seed_everything(cfg.seed)
        model = build_translation_model(cfg, src_tok, tgt_tok)
        load_origin(model, origin)
        extra_config = {**(extra_config or {}), "init_from": origin.record()}
    elif prepared is not None:  # the tokenizer the ids were made with
        src_tok, tgt_tok = prepared.tokenizers()
        seed_everything(cfg.seed)
        model = build_translation_model(cfg, src_tok, tgt_tok)
    else:
        pair = None
        if info.is_main:
            pair = train_tokenizers(train.src, train.tgt, vocab_size=cfg.vocab_size,
                                    joint=cfg.joint, model_type=cfg.model_type,
                                    byte_fallback=cfg.byte_fallback,
                                    character_coverage=cfg.character_coverage, seed=cfg.seed)
        src_tok, tgt_tok = _broadcast_tokenizers(pair) if info.is_distributed else pair
        seed_everything(cfg.seed)  # the model's initial weights depend on the seed alone
        model = build_translation_model(cfg, src_tok, tgt_tok)
    if prepared is not None:
        check_tokenizers(prepared, src_tok, tgt_tok, where=str(init_from or run_dir))
    model.to(dev)
    model_cfg = model.config
    previous = read_config(run_dir).get("precision") if resume else None
    precision = None
    if info.is_main:  # one probe, one choice for every rank
        precision = resolve_precision(cfg.precision, model=model, device=dev, training=True,
                                      previous=previous if isinstance(previous, dict) else None)
    if info.is_distributed:
        precision = D.broadcast_object(precision)
    assert precision is not None
    log.info("%s%s", precision.describe(),
             f"; {precision.probe.describe()}" if precision.probe is not None else "")
    if precision.warning:
        log.warning(precision.warning)
    log.info("model: %s parameters (%s preset, d_model=%d, %d+%d layers), vocabularies %d/%d",
             f"{model.num_parameters():,}", cfg.preset, model_cfg.d_model,
             model_cfg.num_encoder_layers, model_cfg.num_decoder_layers,
             model_cfg.src_vocab_size, model_cfg.tgt_vocab_size)

    if prepared is not None:
        inputs = prepared_inputs(prepared, cfg, max_len=model_cfg.max_len, rank=info.rank,
                                 world_size=info.world_size, validation=info.is_main)
        data, train_pairs = inputs.data, inputs.train_pairs
        valid_batches, bleu_src, bleu_ref = (inputs.valid_batches, inputs.bleu_sources,
                                             inputs.bleu_references)
    else:
        began = time.perf_counter()
        encoded = encode_pairs(train, src_tok, tgt_tok, max_len=model_cfg.max_len, on_long=cfg.on_long)
        _stage("encode", began, f"{len(encoded):,} training pairs, "
               f"{sum(s + t for s, t in encoded.lengths):,} tokens")
        if len(encoded) == 0:
            raise InputError(f"{train.name or 'training data'}: no usable sentence pairs")
        max_tokens = max(cfg.max_tokens, max(encoded.widths))  # one pair always fits a batch
        data = Epochs(encoded, widths=encoded.lengths, collate=collate_pairs, max_tokens=max_tokens,
                      seed=cfg.seed, rank=info.rank, world_size=info.world_size)
        train_pairs = len(encoded)
        valid_batches: list[Batch] = []
        bleu_src: list[list[int]] = []
        bleu_ref: list[str] = []
        if valid is not None and len(valid) > 0 and info.is_main:
            enc_valid = encode_pairs(valid, src_tok, tgt_tok, max_len=model_cfg.max_len,
                                     on_long="truncate")
            sampler = TokenBatchSampler(enc_valid.lengths, max_tokens=max(max_tokens, 2 * cfg.max_tokens),
                                        shuffle=False)
            valid_batches = [collate_pairs([enc_valid[i] for i in idx]) for idx in sampler]
            if cfg.bleu_sample:
                sources, bleu_ref = _bleu_sample(valid, cfg.bleu_sample, cfg.seed)
                bleu_src = [ids[: model_cfg.max_len] for ids in src_tok.encode_batch(sources)]
    task = TranslationTask(
        metric=cfg.metric, tgt_tokenizer=tgt_tok, valid_batches=valid_batches, bleu_sources=bleu_src,
        metrics=cfg.valid_metrics, bleu_references=bleu_ref, label_smoothing=cfg.label_smoothing, pad_id=PAD_ID,
        bos_id=BOS_ID, eos_id=EOS_ID, max_len_a=cfg.decode_max_len_a,
        max_len_b=cfg.decode_max_len_b,
    )
    optimizer = build_optimizer(model, betas=cfg.adam_betas, eps=cfg.adam_eps,
                                weight_decay=cfg.weight_decay)
    scheduler = build_scheduler(optimizer, schedule=LRSchedule(**cfg.schedule_for(model_cfg.d_model)))

    stored_config = {
        "task": "translation",
        "training": cfg.to_dict(),
        "precision": precision.to_dict(),
        "data": inputs.record if prepared is not None else {
            "train": train.name, "valid": valid.name if valid is not None else None,
            "train_pairs": train_pairs, "valid_pairs": len(valid) if valid is not None else 0},
        "tokenizer": {"vocab_size": cfg.vocab_size, "joint": cfg.joint, "model_type": cfg.model_type,
                      "src_vocab_size": src_tok.vocab_size, "tgt_vocab_size": tgt_tok.vocab_size},
        **(extra_config or {}),
    }
    if resume:  # keep what the first run stored (data sizes, extra sections), with the new cfg
        stored_config = {**read_config(run_dir), "training": cfg.to_dict(),
                         "precision": precision.to_dict()}
        stored_config.pop("model", None)

    def save_best(best: torch.nn.Module, evaluation: dict[str, float]) -> None:
        save_model_dir(run_dir, best, config={**stored_config, "best_validation": evaluation},
                       src_tokenizer=src_tok, tgt_tokenizer=tgt_tok)

    if info.is_main and not resume:
        # the model directory is complete from the start: resume and the other verbs can read it
        save_model_dir(run_dir, model, config=stored_config, src_tokenizer=src_tok,
                       tgt_tokenizer=tgt_tok)
    D.barrier()
    trainer = Trainer(model=model, task=task, optimizer=optimizer, scheduler=scheduler,
                      train_data=data, config=cfg.loop_config(precision.precision),
                      run_dir=run_dir,
                      save_best=save_best, device=dev, progress=progress)
    result = trainer.fit(resume=resume)
    summary = summarize(result, run_dir=run_dir, model=model, cfg=cfg, train_pairs=train_pairs)
    if cfg.average_last and info.is_main:
        summary["average"] = _try_average(cfg, trainer, result, run_dir, save_best)
    D.barrier()
    return {**summary, "device": str(dev), "world_size": info.world_size,
            "precision": precision.precision}


def _try_average(cfg: TranslationTrainConfig, trainer: Trainer, result: TrainResult, run_dir: Path,
                 save_best: Callable[[torch.nn.Module, dict[str, float]], None]) -> dict[str, Any] | None:
    """Average the snapshots of the last ``cfg.average_last`` evaluations into the model and
    validate it; it becomes the run's model when its metric beats the best single model's.

    The model is left holding the average (the checkpoint keeps the last weights for a resume).
    """
    from transformer.training.average import average_weights
    from transformer.training.checkpoint import list_snapshots

    snapshots = list_snapshots(run_dir)[-cfg.average_last:]
    if len(snapshots) < 2:
        return None
    average_weights(trainer.model, [path for _, path in snapshots])
    with trainer.autocast():
        evaluation = trainer.task.evaluate(trainer.model)
    if evaluation is None:
        return None
    metric = cfg.metric if cfg.metric in evaluation else "loss"
    value, best = float(evaluation[metric]), result.best_metric
    better = best is None or (value < best if metric == "loss" else value > best)
    steps = [step for step, _ in snapshots]
    record = {"kind": "average", "step": result.steps, "snapshots": steps, "kept": better,
              **{k: float(v) for k, v in evaluation.items()}}
    trainer.write_metrics(record)
    log.info("average of the snapshots of updates %s: %s %.4g (best single model %s)%s",
             steps, metric, value, "none" if best is None else f"{best:.4g}",
             "; it becomes the model" if better else "; the best single model stays")
    if better:
        save_best(trainer.model, {**evaluation, "averaged_steps": steps})
    return record


def summarize(result: TrainResult, *, run_dir: Path, model: torch.nn.Module,
              cfg: TranslationTrainConfig, train_pairs: int) -> dict[str, Any]:
    """The JSON summary ``transformer train --json`` prints."""
    return {
        "run_dir": str(run_dir),
        "parameters": model.num_parameters(),
        "preset": cfg.preset,
        "train_pairs": train_pairs,
        "steps": result.steps,
        "epochs": result.epochs,
        "train_s": round(result.elapsed_s, 2),
        "tokens_per_s": round(result.tokens_per_s, 1),
        "stopped_by": result.stopped_by,
        "best_step": result.best_step,
        "metric": cfg.metric,
        "best_metric": result.best_metric,
        "last_validation": result.last_eval,
    }


def resume_translation(run_dir: Path | str, *, device: str = "auto", progress: bool = False,
                       **stop: Any) -> dict[str, Any]:
    """Continue the run in ``run_dir`` exactly, holding its lock; ``stop`` may change epochs,
    max_steps, minutes or patience (e.g. a larger budget), save_every, save_minutes or
    max_bad_updates."""
    with hold_run_dir(run_dir):
        return resume_unlocked(Path(run_dir), device=device, progress=progress, **stop)


def resume_unlocked(run_dir: Path, *, device: str, progress: bool, **stop: Any) -> dict[str, Any]:
    """:func:`resume_translation` for a caller that holds the lock."""
    stored = read_config(run_dir)
    if stored.get("task", "translation") != "translation" or "training" not in stored:
        raise InputError(f"{run_dir / CONFIG_FILE}: not a translation run that can be resumed")
    if not has_checkpoint(run_dir):
        raise InputError(f"{run_dir / 'checkpoint'}: no checkpoint to resume from")
    bad = sorted(set(stop) - set(RESUME_FIELDS))
    if bad:
        raise ValueError(f"only {', '.join(RESUME_FIELDS)} can change on resume, not {', '.join(bad)}")
    try:
        cfg = TranslationTrainConfig.from_dict(stored["training"])
        cfg = cfg.replace(**{k: v for k, v in stop.items() if v is not None})
    except (TypeError, ValueError) as err:
        raise InputError(f"{run_dir / CONFIG_FILE}: bad training configuration: {err}") from None
    return train_translation(cfg, run_dir=run_dir, device=device, progress=progress, resume=True)


def start_translation(cfg: TranslationTrainConfig, *, run_dir: Path | str, overwrite: bool = False,
                      device: str = "auto", progress: bool = False,
                      init_from: Path | str | None = None) -> dict[str, Any]:
    """``transformer train``: hold ``run_dir``'s lock, refuse (or with ``overwrite`` clear) a model
    already there, then :func:`train_translation` (from ``init_from``'s weights when given)."""
    with hold_run_dir(run_dir):
        return start_unlocked(cfg, run_dir=Path(run_dir), overwrite=overwrite, device=device,
                              progress=progress, init_from=init_from)


def start_unlocked(cfg: TranslationTrainConfig, *, run_dir: Path, overwrite: bool, device: str,
                   progress: bool, init_from: Path | str | None = None) -> dict[str, Any]:
    """:func:`start_translation` for a caller that holds the lock."""
    import shutil

    if init_from is not None and Path(init_from).resolve() == run_dir.resolve():
        raise InputError(f"{run_dir}: --init-from and --out are the same directory; fine-tune "
                         "into another one")
    if (run_dir / CONFIG_FILE).exists() and not overwrite:
        raise InputError(f"{run_dir} already holds a model; pass --overwrite to replace it or "
                         f"--resume {run_dir} to continue it")
    if overwrite:
        for name in ("checkpoint", "checkpoint.old", "checkpoint.tmp", "snapshots", "metrics.jsonl"):
            path = run_dir / name
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    return train_translation(cfg, run_dir=run_dir, device=device, progress=progress,
                             init_from=init_from)
