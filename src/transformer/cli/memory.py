"""``transformer memory``: the training memory of a configuration, estimated (and measured)."""

from __future__ import annotations

import argparse

from transformer.cli.common import (
    MODEL_FLAGS,
    add_json,
    add_model_flags,
    emit_json,
    flag_names,
    overrides,
)
from transformer.config.choices import POOLING, PRECISIONS
from transformer.config.field_error import ConfigError
from transformer.config.presets import SHAPE_PRESETS
from transformer.errors import InputError

# memory's own flags whose field an estimate's error may name (see common.flag_names)
MEMORY_FLAGS = tuple((f"--{name.replace('_', '-')}", name, str, "", ()) for name in (
    "batch_size", "max_tokens", "src_len", "tgt_len", "num_labels", "label_smoothing",
    "vocab_size", "precision"))


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "memory",
        help="estimate the training memory of a configuration (and measure it with --measure)",
        description="Estimate the peak memory of one training step (Adam): parameters, gradients, "
        "optimizer state, activations and the loss, line by line. --decoder-only applies instead "
        "the GPT-2 formula of Trenton Bricken's training-memory calculator (2022), for comparison "
        "(e.g. --decoder-only --decoder-layers 12 --num-heads 12 --d-model 768 --vocab-size 50257 "
        "--batch-size 8 --tgt-len 1024: 26.68 GB).",
    )
    model = p.add_argument_group("model (a preset, then any field overridden)")
    model.add_argument("--preset", choices=SHAPE_PRESETS, default="small",
                       help="the model of a preset or recipe of train or classify train (default "
                       "small, as train; nsmc-cpu and goemotions-cpu are classifiers: "
                       "--encoder-only)")
    add_model_flags(model)
    model.add_argument("--vocab-size", type=int,
                       help="source and target vocabulary (default: the preset's, 8000 for a shape; see `config show`)")
    model.add_argument("--src-vocab", type=int, help="source vocabulary (default --vocab-size)")
    model.add_argument("--tgt-vocab", type=int, help="target vocabulary (default --vocab-size)")
    model.add_argument("--encoder-only", action="store_true", help="a classifier")
    model.add_argument("--num-labels", type=int, default=2, help="classifier labels (default 2)")
    model.add_argument("--pooling", choices=POOLING, default="mean",
                       help="a classifier's pooling (default mean)")
    model.add_argument("--decoder-only", action="store_true",
                       help="a GPT-2 model by Bricken's formula (d_ff defaults to 4 x d_model)")
    batch = p.add_argument_group("batch and training")
    batch.add_argument("--batch-size", type=int, default=32, help="rows (default 32)")
    batch.add_argument("--max-tokens", type=int,
                       help="instead of --batch-size: rows that fill this many padded tokens")
    batch.add_argument("--src-len", type=int, default=64, help="source tokens (default 64)")
    batch.add_argument("--tgt-len", type=int, help="target tokens with BOS (default --src-len)")
    batch.add_argument("--precision", choices=PRECISIONS, default="fp32",
                       help="bf16: autocast; fp16: autocast with a grad scaler (default fp32)")
    batch.add_argument("--device", choices=("cuda", "cpu"),
                       help="what the estimate is for and --measure runs on "
                       "(default: cuda when available, else cpu)")
    batch.add_argument("--label-smoothing", type=float, default=0.1,
                       help="epsilon_ls: above 0 the loss keeps one more logits-sized tensor "
                       "(default 0.1, the paper's)")
    p.add_argument("--measure", action="store_true",
                   help="also run real training steps and print the measured peak")
    add_json(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from transformer import memory
    from transformer.config import apply_overrides
    from transformer.config.presets import preset_model

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    changes = {key.removeprefix("model."): value for key, value in overrides(args).items()}
    try:
        shape, classifier = preset_model(args.preset)
        for flag in ("vocab_size", "src_vocab", "tgt_vocab"):
            value = getattr(args, flag)
            if value is not None and value < 1:
                raise InputError(f"--{flag.replace('_', '-')} must be a positive integer, "
                                 f"got {value}")
        vocab = {"src_vocab_size": args.vocab_size if args.src_vocab is None else args.src_vocab,
                 "tgt_vocab_size": args.vocab_size if args.tgt_vocab is None else args.tgt_vocab}
        vocab = {key: value for key, value in vocab.items() if value is not None}
        config = apply_overrides(shape, {**vocab, **changes})
        step = memory.TrainingStep(
            batch_size=args.batch_size, src_len=args.src_len, tgt_len=args.tgt_len,
            precision=args.precision, encoder_only=args.encoder_only or classifier,
            num_labels=args.num_labels, pooling=args.pooling, label_smoothing=args.label_smoothing)
        result = memory.memory_job(config, step, max_tokens=args.max_tokens, device=device,
                                   decoder_only=args.decoder_only,
                                   decoder_only_d_ff=changes.get("d_ff"), measure=args.measure)
    except InputError:
        raise
    except ConfigError as err:  # a bad flag value or combination, in the flags' words
        raise InputError(err.named(flag_names(MODEL_FLAGS, MEMORY_FLAGS))) from None
    except ValueError as err:
        raise InputError(str(err).splitlines()[0]) from None
    if args.json:
        emit_json(result.to_dict())
    else:
        print(result.format())
    return 0
