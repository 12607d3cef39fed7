"""``transformer translate``: lines from stdin, a file, or an interactive prompt."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

from transformer.cli.decoding import add_decoding_flags, translator_of
from transformer.errors import InputError

log = logging.getLogger("transformer")


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "translate",
        help="translate sentences given as arguments, or lines from stdin, a file or a prompt",
        description="Translate text line by line with a model directory; a line of several "
        "sentences is split into sentences and joined back (--no-split: the whole line at once). "
        "Translates the "
        "SENTENCE arguments (one output line each; standard input is then not read), else reads "
        "standard input (or -i FILE) and writes one translation per input line, in input order "
        "(empty input line: empty output line); with a terminal on standard input, an "
        "interactive prompt. With --nbest K, each input gives K lines "
        "'LINE<tab>SCORE<tab>TRANSLATION'; with --json, one JSON object per input line. A line "
        "with characters the model's vocabulary lacks gets a warning on standard error (in --json: unknown_pieces); they come out as ⁇.",
    )
    p.add_argument("--model", required=True, metavar="RUN_DIR", help="model directory")
    p.add_argument("sentences", nargs="*", metavar="SENTENCE",
                   help="sentences to translate (quote each); not with -i")
    p.add_argument("-i", "--input", metavar="FILE", help="read sentences from FILE (.gz ok)")
    p.add_argument("-o", "--output", metavar="FILE", help="write translations to FILE (atomically)")
    p.add_argument("--nbest", type=int, help="print the K best translations of each sentence")
    p.add_argument("--json", action="store_true", help="one JSON object per input line")
    p.add_argument("--alignments", action="store_true",
                   help="add each line's word alignments as Pharaoh pairs 'i-j' (0-based "
                   "source word i, target word j; words: whitespace-separated): after the "
                   "translation as 'TRANSLATION ||| 0-0 1-2', or in --json as alignments, a "
                   "list of [i, j]; read "
                   "from cross-attention (transformer.inference.alignment says the rule)")
    add_decoding_flags(p)
    p.set_defaults(handler=run)


def _stdin_lines() -> Iterator[str]:
    """Lines of standard input as text (without line endings), decoded as UTF-8 line by line."""
    for number, raw in enumerate(sys.stdin.buffer, start=1):
        try:
            yield raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as err:
            raise InputError(f"<stdin>, line {number}: not valid UTF-8 ({err.reason})") from None


def _prompt() -> Iterator[str]:
    print("Type a sentence and press Enter (Ctrl-D to quit).", file=sys.stderr)
    while True:
        try:
            yield input("> ")
        except EOFError:
            print(file=sys.stderr)
            return


def _lines_of(args: argparse.Namespace, t: Any, number: int, unknown: int = 0,
              engine: str = "torch") -> list[str]:
    """The output lines of translation ``t`` of input line ``number`` (which has ``unknown``
    pieces the vocabulary lacks; ``engine`` decoded it)."""
    if args.json:
        item = {"line": number, "translation": t.text, "score": t.score,
                "sentences": t.sentences, "cut_sentences": t.cut, "engine": engine}
        item["unknown_pieces"] = unknown
        if args.nbest:
            item["nbest"] = [{"translation": s, "score": v} for s, v in t.nbest]
        if args.alignments:
            item["alignments"] = [list(pair) for pair in t.alignments or []]
        return [json.dumps(item, ensure_ascii=False, sort_keys=True)]
    if args.nbest:  # always exactly --nbest lines per input: LINE <tab> SCORE <tab> TEXT
        pairs = t.nbest or [("", 0.0)]
        pairs = pairs + [pairs[-1]] * (args.nbest - len(pairs))
        return [f"{number}\t{score:.4f}\t{text}" for text, score in pairs]
    if args.alignments:  # as Marian prints it
        from transformer.inference.alignment import pharaoh

        return [f"{t.text} ||| {pharaoh(t.alignments or [])}"]
    return [t.text]


def run(args: argparse.Namespace) -> int:
    from transformer.inference.unknown import UnknownPieces

    if args.sentences and args.input is not None:
        raise InputError("give sentences as arguments or -i FILE, not both")
    from transformer.inference.lines import stream_lines, translate_lines

    if args.alignments and args.nbest and not args.json:
        raise InputError("--alignments with --nbest needs --json (the best translation's "
                         "alignments go beside its n-best list)")
    translator = translator_of(args, nbest=args.nbest)
    if args.alignments:
        from dataclasses import replace

        translator.options = replace(translator.options, alignments=True)
    src_lang, tgt_lang = translator.record.languages
    how = dict(split=args.split_sentences, src_lang=src_lang, tgt_lang=tgt_lang)
    source = args.input or ("argument" if args.sentences else "<stdin>")
    unknown = UnknownPieces(translator.src_tokenizer, source=source)
    if args.input is not None:
        from transformer.data.parallel import read_lines

        sources = list(unknown.watch(read_lines(args.input)))
        results: Any = translate_lines(translator, sources, **how)
    elif args.sentences:
        results = translate_lines(translator, list(unknown.watch(args.sentences)), **how)
    elif sys.stdin.isatty() and args.output is None:  # interactive prompt
        results = stream_lines(translator, unknown.watch(_prompt()), chunk_size=1, **how)
    else:
        results = stream_lines(translator, unknown.watch(_stdin_lines()), **how)

    if args.output is not None:  # whole output first, then one atomic write
        from transformer.atomic import atomic_write_bytes

        out = [line for n, t in enumerate(results, start=1) for line in
               _lines_of(args, t, n, unknown.lines.get(n, 0), translator.engine)]
        atomic_write_bytes(args.output, "".join(f"{line}\n" for line in out).encode("utf-8"))
        log.info("wrote %d lines to %s", len(out), args.output)
    else:
        for n, t in enumerate(results, start=1):
            lines = _lines_of(args, t, n, unknown.lines.get(n, 0), translator.engine)
            sys.stdout.write("".join(f"{line}\n" for line in lines))
            sys.stdout.flush()
    if translator.truncated:
        log.warning("%d source sentences were longer than the model's %d positions and were cut",
                    translator.truncated, translator.model.config.max_len)
    return 0
