"""The ``transformer`` command line. The only module that parses arguments.

Each verb has an ``_add_<verb>`` function that declares its arguments and sets ``handler`` to a
function ``(args) -> int``; handlers import their area lazily so ``transformer --help`` stays fast.

Exit status: 0 success, 2 bad usage or bad input (one line on stderr naming the file, line or
value), 1 internal failure.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from transformer.errors import InputError

log = logging.getLogger("transformer")


def emit_json(obj: Any) -> None:
    """Print one JSON object on stdout (every verb's ``--json``)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, sort_keys=True) + "\n")
    sys.stdout.flush()


def _add_version(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("version", help="print the package and PyTorch versions")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    def run(args: argparse.Namespace) -> int:
        import torch

        from transformer import __version__

        info = {"transformer": __version__, "torch": torch.__version__}
        if args.json:
            emit_json(info)
        else:
            print(f"transformer {info['transformer']} (torch {info['torch']})")
        return 0

    p.set_defaults(handler=run)


def _add_memory(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "memory",
        help="estimate the training memory of a configuration (and measure it with --measure)",
        description="Estimate the peak memory of one training step (Adam): parameters, gradients, "
        "optimizer state, activations and the loss, line by line. --decoder-only applies the seed "
        "tutorial's GPT-2 formula instead (e.g. --decoder-only --decoder-layers 12 --heads 12 "
        "--d-model 768 --vocab-size 50257 --batch-size 8 --tgt-len 1024: 26.68 GB).",
    )
    model = p.add_argument_group("model (a preset, then any field overridden)")
    model.add_argument("--preset", choices=("tiny", "small", "base", "big"), default="base")
    for flag, kind, what in (
        ("--d-model", int, "d_model"), ("--heads", int, "attention heads"),
        ("--encoder-layers", int, "encoder layers"), ("--decoder-layers", int, "decoder layers"),
        ("--d-ff", int, "feed-forward width"), ("--max-len", int, "positions"),
        ("--dropout", float, "dropout"), ("--attention-dropout", float, "attention dropout"),
        ("--activation-dropout", float, "FFN dropout"),
    ):
        model.add_argument(flag, type=kind, help=f"{what} (default: the preset's)")
    model.add_argument("--vocab-size", type=int, default=8000,
                       help="source and target vocabulary (default 8000)")
    model.add_argument("--src-vocab", type=int, help="source vocabulary (default --vocab-size)")
    model.add_argument("--tgt-vocab", type=int, help="target vocabulary (default --vocab-size)")
    model.add_argument("--share-embeddings", action="store_true")
    model.add_argument("--tie-embeddings", action="store_true")
    model.add_argument("--norm-first", action="store_true", help="pre-LN")
    model.add_argument("--activation", choices=("relu", "gelu"))
    model.add_argument("--positional", choices=("sinusoidal", "learned"))
    model.add_argument("--encoder-only", action="store_true", help="a classifier")
    model.add_argument("--num-labels", type=int, default=2, help="classifier labels (default 2)")
    model.add_argument("--pooling", choices=("mean", "cls"), default="mean")
    model.add_argument("--decoder-only", action="store_true",
                       help="the seed's GPT-2 formula (d_ff defaults to 4 x d_model)")
    batch = p.add_argument_group("batch and training")
    batch.add_argument("--batch-size", type=int, default=32, help="rows (default 32)")
    batch.add_argument("--max-tokens", type=int,
                       help="instead of --batch-size: rows that fill this many padded tokens")
    batch.add_argument("--src-len", type=int, default=64, help="source tokens (default 64)")
    batch.add_argument("--tgt-len", type=int, help="target tokens with BOS (default --src-len)")
    batch.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                       help="bf16: autocast; fp16: autocast with a grad scaler (default fp32)")
    batch.add_argument("--device", choices=("cuda", "cpu"),
                       help="what the estimate is for and --measure runs on "
                       "(default: cuda when available, else cpu)")
    batch.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--measure", action="store_true",
                   help="also run real training steps and print the measured peak")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    def run(args: argparse.Namespace) -> int:
        import torch

        from transformer import memory
        from transformer.config import ModelConfig

        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        overrides = {
            name: value for name, value in (
                ("d_model", args.d_model), ("num_heads", args.heads),
                ("num_encoder_layers", args.encoder_layers),
                ("num_decoder_layers", args.decoder_layers), ("d_ff", args.d_ff),
                ("max_len", args.max_len), ("dropout", args.dropout),
                ("attention_dropout", args.attention_dropout),
                ("activation_dropout", args.activation_dropout),
                ("activation", args.activation), ("positional", args.positional),
            ) if value is not None
        }
        for flag in ("share_embeddings", "tie_embeddings", "norm_first"):
            if getattr(args, flag):
                overrides[flag] = True
        src_vocab = args.src_vocab or args.vocab_size
        tgt_vocab = args.tgt_vocab or args.vocab_size
        try:
            if args.decoder_only:
                if args.measure:
                    raise InputError("--measure needs an encoder-decoder or --encoder-only model; "
                                     "--decoder-only is the seed's formula only")
                base = ModelConfig.preset(args.preset, src_vocab_size=src_vocab,
                                          tgt_vocab_size=tgt_vocab)
                d_model = overrides.get("d_model", base.d_model)
                seq_len = args.tgt_len or args.src_len
                batch_size = (memory.batch_for_tokens(args.max_tokens, src_len=seq_len,
                                                      tgt_len=None, encoder_only=True)
                              if args.max_tokens else args.batch_size)
                estimate = memory.seed_formula_estimate(
                    num_layers=overrides.get("num_decoder_layers", base.num_decoder_layers),
                    num_heads=overrides.get("num_heads", base.num_heads), d_model=d_model,
                    d_ff=overrides.get("d_ff", 4 * d_model), vocab_size=tgt_vocab,
                    batch_size=batch_size, seq_len=seq_len,
                    bytes_per_value=4 if args.precision == "fp32" else 2)
                measured = None
            else:
                config = ModelConfig.preset(args.preset, src_vocab_size=src_vocab,
                                            tgt_vocab_size=tgt_vocab, **overrides)
                batch_size = args.batch_size
                if args.max_tokens:
                    batch_size = memory.batch_for_tokens(
                        args.max_tokens, src_len=args.src_len, tgt_len=args.tgt_len,
                        encoder_only=args.encoder_only)
                shape = dict(batch_size=batch_size, src_len=args.src_len, tgt_len=args.tgt_len,
                             precision=args.precision, device=device,
                             encoder_only=args.encoder_only, num_labels=args.num_labels,
                             pooling=args.pooling, label_smoothing=args.label_smoothing)
                estimate = memory.estimate_training_memory(config, **shape)
                measured = None
                if args.measure:
                    log.info("measuring two training steps on %s ...", device)
                    measured = memory.measure_training_peak(config, **shape)
        except ValueError as err:  # a bad flag value or combination
            raise InputError(str(err)) from None
        if args.json:
            out = estimate.to_dict()
            if measured is not None:
                out["measured"] = measured.to_dict()
                out["ratio"] = estimate.peak_bytes / max(measured.peak_bytes, 1)
            emit_json(out)
        else:
            print(memory.format_report(estimate, measured))
        return 0

    p.set_defaults(handler=run)


VERBS: list[Callable[[argparse._SubParsersAction], None]] = [_add_version, _add_memory]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="transformer",
        description='The Transformer of "Attention Is All You Need": train, translate, evaluate, '
        "classify and look inside.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for add in VERBS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    if not hasattr(args, "handler"):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.handler(args) or 0)
    except InputError as err:
        print(f"transformer: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("transformer: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
