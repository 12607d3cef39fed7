"""``transformer attention``: the attention maps of one sentence."""

from __future__ import annotations

import argparse
import logging

from transformer.cli.common import DEVICE_HELP, add_json, add_model_dir, device, emit_json
from transformer.errors import InputError

log = logging.getLogger("transformer")


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "attention",
        help="draw the attention maps of one sentence",
        description="Translate SENTENCE greedily (or classify it) and draw its attention weights "
        "with the tokens as axis labels: a grid of layers x heads for --kind encoder, decoder or "
        "cross (encoder-decoder), or the head-averaged source-target alignment of one layer. For "
        "a translation model the alignment is also written beside the grid (OUT-alignment.png).",
    )
    p.add_argument("sentence", help="the sentence (quote it); a translation model's text of "
                   "several sentences shows one of them, see --sentence-number")
    p.add_argument("--sentence-number", type=int, default=1, metavar="N",
                   help="which sentence of a text that holds several (default 1, the first)")
    add_model_dir(p)
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
    sentence, sentences = args.sentence, [args.sentence]
    if loaded.record.is_translation:
        from transformer.inference.lines import nth_sentence

        try:
            sentence, sentences = nth_sentence(args.sentence, args.sentence_number,
                                               lang=loaded.record.languages[0])
        except ValueError as err:
            raise InputError(f"--sentence-number {err}") from None
        if len(sentences) > 1:
            log.info("the text holds %d sentences; showing sentence %d: %s (--sentence-number N "
                     "for another)", len(sentences), args.sentence_number, sentence)
    att = sentence_attention(loaded, sentence, max_len=args.max_len)
    kind, written = save_attention(att, args.out, kind=args.kind, layer=args.layer, svg=args.svg)
    files = [str(f) for f in written]
    if args.json:
        emit_json({"sentence": sentence, "sentences": sentences,
                   "sentence_number": args.sentence_number, "task": att.task, "kind": kind,
                   "output": att.output, "source_tokens": att.src_tokens,
                   "target_tokens": att.tgt_out_tokens, "files": files})
    else:
        print(f"{'label' if att.task == 'classification' else 'translation'}: {att.output}")
        for f in files:
            print(f"wrote {f}")
    return 0
