"""``transformer import marian``: another toolkit's checkpoint -> our model directory."""

from __future__ import annotations

import argparse

from transformer.cli.common import add_json, emit_json


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import", help="turn another toolkit's model into our model directory (Marian/OPUS-MT)",
        description="Convert a trained model from another toolkit into a model directory that "
        "every verb reads (translate, evaluate, attention, export).",
    )
    formats = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    m = formats.add_parser(
        "marian", help="a Hugging Face MarianMT (OPUS-MT) directory",
        description="Read a MarianMT directory as Hugging Face saves it (config.json, "
        "model.safetensors or pytorch_model.bin, source.spm, target.spm, vocab.json) and write "
        "our model directory: the same logits, with Marian's options (sines-then-cosines "
        "positions, swish, the final logits bias, the source's </s>, the pad start token) "
        "mapped onto ours. An option we do not support is named and nothing is written.",
    )
    m.add_argument("path", metavar="PATH", help="the MarianMT directory")
    m.add_argument("--out", required=True, metavar="RUN_DIR", help="the model directory to write")
    m.add_argument("--overwrite", action="store_true", help="replace a model already in --out")
    add_json(m)
    m.set_defaults(handler=run_marian)


def run_marian(args: argparse.Namespace) -> int:
    from transformer.convert.marian import import_marian

    summary = import_marian(args.path, args.out, overwrite=args.overwrite)
    if args.json:
        emit_json(summary)
    else:
        print(f"imported a Marian model ({summary['parameters']:,} parameters, vocabulary "
              f"{summary['vocab_size']}) into {summary['out']}")
    return 0
