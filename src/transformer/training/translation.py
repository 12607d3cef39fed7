"""Training a translation model end to end: data, tokenizers, model, the Trainer, the model directory.

    cfg = TranslationTrainConfig(data="multi30k", src_lang="en", tgt_lang="de", preset="small",
                                 minutes=30)
    summary = train_translation(cfg, run_dir="runs/m30k", progress=True)
    summary = resume_translation("runs/m30k", minutes=60)     # continue exactly where it stopped

What it writes into the run directory (DESIGN.md): ``config.json`` (model, tokenizer and training
configuration, where the data came from), ``model.safetensors`` (best by validation BLEU),
``tokenizer/``, ``checkpoint/`` (exact resume) and ``metrics.jsonl``. Under ``torchrun`` every rank
trains on its shard of the batches and rank 0 alone writes.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from transformer.config import ModelConfig
from transformer.config.choices import ON_LONG
from transformer.config.choices import TRANSLATION_METRICS as METRICS
from transformer.data.batch import Batch
from transformer.data.batching import collate_pairs, encode_pairs
from transformer.data.epochs import Epochs
from transformer.data.parallel import ParallelCorpus
from transformer.data.sampler import TokenBatchSampler
from transformer.data.tokenizer import BOS_ID, EOS_ID, MODEL_TYPES, PAD_ID, Tokenizer
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
from transformer.training import distributed as D
from transformer.training.checkpoint import has_checkpoint, seed_everything
from transformer.training.optimizer import build_optimizer
from transformer.training.schedule import LRSchedule, build_scheduler
from transformer.training.trainer import TrainConfig, Trainer, TrainResult
from transformer.training.translation_task import TranslationTask

log = logging.getLogger(__name__)

BUILTIN_DATA = ("multi30k", "numbers")
STOP_FIELDS = ("epochs", "max_steps", "minutes", "patience")


@dataclass(frozen=True)
class TranslationTrainConfig:
    """Everything about a translation run except the model shape's overrides (``model``).

    Data: a corpus by name (``data="multi30k"`` with ``src_lang``/``tgt_lang``, or ``"numbers"``,
    the built-in task) or explicit parallel files (``train_src``/``train_tgt``, optional
    ``valid_src``/``valid_tgt``). The model is ``ModelConfig.preset(preset, **model)`` with the
    tokenizers' vocabulary sizes.
    """

    # data
    data: str | None = "multi30k"
    src_lang: str = "en"
    tgt_lang: str = "de"
    train_src: str | None = None
    train_tgt: str | None = None
    valid_src: str | None = None
    valid_tgt: str | None = None
    on_long: str = "truncate"
    # tokenizer
    vocab_size: int = 8000
    joint: bool = True
    model_type: str = "bpe"
    byte_fallback: bool = True
    # model
    preset: str = "small"
    model: dict[str, Any] = field(default_factory=dict)
    # batches and optimisation
    max_tokens: int = 4096  # per micro-batch and rank, padding included
    accumulate: int = 1
    schedule: str = "noam"
    warmup: int = 4000
    lr_scale: float = 1.0  # noam: multiplies equation (3)
    lr: float = 1e-3  # inverse_sqrt: the peak learning rate
    cooldown: int = 0  # linear cool-down over the last N updates before max_steps (0: none)
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    clip_norm: float | None = 1.0
    precision: str = "fp32"
    # the loop
    epochs: int | None = None
    max_steps: int | None = None
    minutes: float | None = None
    eval_every: int = 500
    log_every: int = 50
    patience: int | None = None
    average_last: int = 0  # keep the weights of the last N evaluations; at the end try their mean
    bleu_sample: int = 500  # validation sentences translated for BLEU (0: no BLEU)
    metric: str = "bleu"  # selects the best model: bleu, chrf or exact_match
    decode_max_len_a: float = 1.5
    decode_max_len_b: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        if self.data is None and not (self.train_src and self.train_tgt):
            raise ValueError("give a corpus name (data) or train_src and train_tgt files")
        if self.data is not None and self.data not in BUILTIN_DATA:
            raise ValueError(f"unknown corpus {self.data!r}; known: {', '.join(BUILTIN_DATA)}")
        if bool(self.valid_src) != bool(self.valid_tgt):
            raise ValueError("give both valid_src and valid_tgt, or neither")
        if self.max_tokens < 2 or self.vocab_size < 8 or self.bleu_sample < 0:
            raise ValueError(
                f"bad max_tokens={self.max_tokens}, vocab_size={self.vocab_size} or "
                f"bleu_sample={self.bleu_sample}"
            )
        if self.on_long not in ON_LONG:
            raise ValueError(f"on_long must be one of {ON_LONG}, got {self.on_long!r}")
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"model_type must be one of {MODEL_TYPES}, got {self.model_type!r}")
        if self.average_last == 1 or self.average_last < 0:
            raise ValueError(f"average_last must be 0 (off) or at least 2, got {self.average_last}")
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {self.metric!r}")
        LRSchedule(kind=self.schedule, warmup=self.warmup, scale=self.lr_scale, peak_lr=self.lr,
                   cooldown=self.cooldown, total=self.max_steps)
        self.loop_config()  # validates the loop fields

    def loop_config(self) -> TrainConfig:
        return TrainConfig(
            epochs=self.epochs, max_steps=self.max_steps, minutes=self.minutes,
            accumulate=self.accumulate, clip_norm=self.clip_norm, precision=self.precision,
            eval_every=self.eval_every, log_every=self.log_every, patience=self.patience,
            keep_last=self.average_last, seed=self.seed,
        )

    def replace(self, **changes: Any) -> TranslationTrainConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["adam_betas"] = list(self.adam_betas)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TranslationTrainConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown training fields: {', '.join(unknown)}")
        data = dict(data)
        if "adam_betas" in data:
            data["adam_betas"] = tuple(data["adam_betas"])
        return cls(**data)


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
    try:
        model_cfg = ModelConfig.preset(cfg.preset, src_vocab_size=src_tok.vocab_size,
                                       tgt_vocab_size=tgt_tok.vocab_size, **cfg.model)
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
) -> dict[str, Any]:
    """Train (or with ``resume`` continue) a translation model into ``run_dir``; return a summary.

    ``splits`` ({"train", "valid"} corpora) replaces loading the data ``cfg`` names. With
    ``resume`` the tokenizers and model come from ``run_dir`` and training continues from its
    checkpoint. ``extra_config`` is stored in ``config.json`` beside the training configuration.
    """
    run_dir = Path(run_dir)
    info, dev = D.init_distributed(device=device)
    seed_everything(cfg.seed)
    if splits is None:
        splits = load_splits(cfg)
    train, valid = splits["train"], splits.get("valid")

    if resume:
        src_tok, tgt_tok = load_tokenizer_dir(run_dir)
        stored = read_config(run_dir)
        from transformer.model_dir import build_model

        model = build_model(stored, source=str(run_dir / CONFIG_FILE))
        check_vocabulary(model.config, src_tok, tgt_tok, where=str(run_dir / "tokenizer"))
    else:
        pair = None
        if info.is_main:
            pair = train_tokenizers(train.src, train.tgt, vocab_size=cfg.vocab_size,
                                    joint=cfg.joint, model_type=cfg.model_type,
                                    byte_fallback=cfg.byte_fallback, seed=cfg.seed)
        src_tok, tgt_tok = _broadcast_tokenizers(pair) if info.is_distributed else pair
        seed_everything(cfg.seed)  # the model's initial weights depend on the seed alone
        model = build_translation_model(cfg, src_tok, tgt_tok)
    model.to(dev)
    model_cfg = model.config
    log.info("model: %s parameters (%s preset, d_model=%d, %d+%d layers), vocabularies %d/%d",
             f"{model.num_parameters():,}", cfg.preset, model_cfg.d_model,
             model_cfg.num_encoder_layers, model_cfg.num_decoder_layers,
             model_cfg.src_vocab_size, model_cfg.tgt_vocab_size)

    encoded = encode_pairs(train, src_tok, tgt_tok, max_len=model_cfg.max_len, on_long=cfg.on_long)
    if len(encoded) == 0:
        raise InputError(f"{train.name or 'training data'}: no usable sentence pairs")
    max_tokens = max(cfg.max_tokens, max(encoded.widths))  # one pair always fits a batch
    data = Epochs(encoded, widths=encoded.lengths, collate=collate_pairs, max_tokens=max_tokens,
                  seed=cfg.seed, rank=info.rank, world_size=info.world_size)
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
        bleu_references=bleu_ref, label_smoothing=cfg.label_smoothing, pad_id=PAD_ID,
        bos_id=BOS_ID, eos_id=EOS_ID, max_len_a=cfg.decode_max_len_a,
        max_len_b=cfg.decode_max_len_b,
    )
    optimizer = build_optimizer(model, betas=cfg.adam_betas, eps=cfg.adam_eps,
                                weight_decay=cfg.weight_decay)
    scheduler = build_scheduler(optimizer, schedule=LRSchedule(
        kind=cfg.schedule, warmup=cfg.warmup, d_model=model_cfg.d_model, scale=cfg.lr_scale,
        peak_lr=cfg.lr, cooldown=cfg.cooldown, total=cfg.max_steps))

    stored_config = {
        "task": "translation",
        "training": cfg.to_dict(),
        "data": {"train": train.name, "valid": valid.name if valid is not None else None,
                 "train_pairs": len(encoded), "valid_pairs": len(valid) if valid is not None else 0},
        "tokenizer": {"vocab_size": cfg.vocab_size, "joint": cfg.joint, "model_type": cfg.model_type,
                      "src_vocab_size": src_tok.vocab_size, "tgt_vocab_size": tgt_tok.vocab_size},
        **(extra_config or {}),
    }
    if resume:  # keep what the first run stored (data sizes, extra sections), with the new cfg
        stored_config = {**read_config(run_dir), "training": cfg.to_dict()}
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
                      train_data=data, config=cfg.loop_config(), run_dir=run_dir,
                      save_best=save_best, device=dev, progress=progress)
    result = trainer.fit(resume=resume)
    summary = summarize(result, run_dir=run_dir, model=model, cfg=cfg, train_pairs=len(encoded))
    if cfg.average_last and info.is_main:
        summary["average"] = _try_average(cfg, trainer, result, run_dir, save_best)
    D.barrier()
    return {**summary, "device": str(dev), "world_size": info.world_size}


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
    """Continue the run in ``run_dir`` exactly; ``stop`` may change epochs, max_steps, minutes or
    patience (e.g. a larger budget)."""
    run_dir = Path(run_dir)
    stored = read_config(run_dir)
    if stored.get("task", "translation") != "translation" or "training" not in stored:
        raise InputError(f"{run_dir / CONFIG_FILE}: not a translation run that can be resumed")
    if not has_checkpoint(run_dir):
        raise InputError(f"{run_dir / 'checkpoint'}: no checkpoint to resume from")
    bad = sorted(set(stop) - set(STOP_FIELDS))
    if bad:
        raise ValueError(f"only {', '.join(STOP_FIELDS)} can change on resume, not {', '.join(bad)}")
    try:
        cfg = TranslationTrainConfig.from_dict(stored["training"])
        cfg = cfg.replace(**{k: v for k, v in stop.items() if v is not None})
    except (TypeError, ValueError) as err:
        raise InputError(f"{run_dir / CONFIG_FILE}: bad training configuration: {err}") from None
    return train_translation(cfg, run_dir=run_dir, device=device, progress=progress, resume=True)
