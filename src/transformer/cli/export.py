"""``transformer export ctranslate2``: our model directory -> another engine's model directory."""

from __future__ import annotations

import argparse
import logging

from transformer.cli.common import add_json, add_model_dir, emit_json
from transformer.errors import InputError

log = logging.getLogger("transformer")


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export", help="write a model directory in another engine's format (CTranslate2, Hugging Face)",
        description="Convert a translation model directory for deployment elsewhere.",
    )
    formats = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    c = formats.add_parser(
        "ctranslate2", help="a CTranslate2 directory (model.bin and vocabularies)",
        description="Write the model through CTranslate2's own TransformerSpec: the directory "
        "loads with ctranslate2.Translator(DIR) and decodes as ours does: the same greedy output; "
        "beam search can differ on some sentences, since CTranslate2's length penalty is len^a "
        "where ours is GNMT's and it keeps finished hypotheses in the beam. --quantization int8 "
        "stores int8 weights; on a CPU without VNNI, whose int8 kernel saturates on them, it warns: "
        "--int8-max 63 stores 7-bit weights that decode accurately there (or decode with CT2_USE_MKL=1).",
    )
    add_model_dir(c, text="model directory (ours)")
    c.add_argument("--out", required=True, metavar="DIR", help="a new or empty directory")
    c.add_argument("--quantization", metavar="TYPE",
                   help="int8, int8_float32, int16, float16, bfloat16, ... (default: float32)")
    c.add_argument("--int8-max", type=int, default=127, metavar="N",
                   help="the largest int8 weight (default 127; 63 for CPUs without VNNI)")
    add_json(c)
    c.set_defaults(handler=run_ctranslate2)
    h = formats.add_parser(
        "huggingface", help="a Hugging Face MarianMT directory",
        description="Write a MarianMT directory that MarianMTModel.from_pretrained and "
        "MarianTokenizer load, with the same logits as ours (post-LN models with shared "
        "embeddings and sinusoidal positions; anything else is refused).",
    )
    add_model_dir(h, text="model directory (ours)")
    h.add_argument("--out", required=True, metavar="DIR", help="a new or empty directory")
    add_json(h)
    h.set_defaults(handler=run_huggingface)


def run_ctranslate2(args: argparse.Namespace) -> int:
    from transformer.convert.ctranslate2 import export_ctranslate2, int8_decoding_caveat

    if not 1 <= args.int8_max <= 127:
        raise InputError(f"--int8-max must be from 1 to 127, got {args.int8_max}")
    out = export_ctranslate2(args.model, args.out, quantization=args.quantization,
                             int8_max=args.int8_max)
    caveat = int8_decoding_caveat(args.quantization, args.int8_max)
    if caveat:
        log.warning(caveat)
    summary = {"format": "ctranslate2", "out": str(out),
               "quantization": args.quantization or "float32"}
    if args.json:
        emit_json(summary)
    else:
        print(f"wrote a CTranslate2 model ({summary['quantization']}) to {out}")
    return 0


def run_huggingface(args: argparse.Namespace) -> int:
    from transformer.convert.huggingface import export_huggingface

    out = export_huggingface(args.model, args.out)
    if args.json:
        emit_json({"format": "huggingface", "out": str(out)})
    else:
        print(f"wrote a MarianMT model to {out}")
    return 0
