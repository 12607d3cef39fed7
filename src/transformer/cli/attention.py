"""``transformer attention``: the attention maps of one sentence."""

from __future__ import annotations

import argparse

from transformer.cli.common import DEVICE_HELP, add_json, device, emit_json
from transformer.errors import InputError


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "attention",
        help="draw the attention maps of one sentence",
        description="Translate SENTENCE greedily (or classify it) and draw its attention weights "
        "with the tokens as axis labels: a grid of layers x heads for --kind encoder, decoder or "
        "cross (encoder-decoder), or the head-averaged source-target alignment of one layer. For "
        "a translation model the alignment is also written beside the grid (OUT-alignment.png).",
    )
    p.add_argument("sentence", help="the sentence (quote it)")
    p.add_argument("--model", required=True, metavar="RUN_DIR", help="model directory")
    p.add_argument("--kind", choices=("encoder", "decoder", "cross", "alignment"),
                   help="which attention (default: cross for translation, encoder for a classifier)")
    p.add_argument("--layer", type=int, help="decoder layer of the alignment, from 1 (default last)")
    p.add_argument("--max-len", type=int, help="longest translation in tokens (default: model's)")
    p.add_argument("--out", help="picture file, .png/.svg/.pdf (default attention-KIND.png)")
    p.add_argument("--svg", action="store_true", help="also write an SVG beside the picture")
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    add_json(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if not args.sentence.strip():
        raise InputError("the sentence is empty")
    if args.max_len is not None and args.max_len < 1:
        raise InputError(f"--max-len must be positive, got {args.max_len}")

    from transformer.model_dir import load_model_dir
    from transformer.visualization.sentence import save_attention, sentence_attention

    loaded = load_model_dir(args.model, device=device(args.device))
    att = sentence_attention(loaded, args.sentence, max_len=args.max_len)
    kind, written = save_attention(att, args.out, kind=args.kind, layer=args.layer, svg=args.svg)
    files = [str(f) for f in written]
    if args.json:
        emit_json({"sentence": args.sentence, "task": att.task, "kind": kind,
                   "output": att.output, "source_tokens": att.src_tokens,
                   "target_tokens": att.tgt_out_tokens, "files": files})
    else:
        print(f"{'label' if att.task == 'classification' else 'translation'}: {att.output}")
        for f in files:
            print(f"wrote {f}")
    return 0
