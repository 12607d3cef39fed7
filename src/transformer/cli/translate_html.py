"""``transformer translate --format html``: HTML documents in, HTML out, markup kept.

Each SENTENCE argument is one snippet (each translation followed by a newline); without
arguments, all of standard input is one document, and ``-i FILE`` is one document (plain or
gzip), written as it is translated to standard output, or with ``-o FILE`` in one atomic write
(a document is translated whole, so there is no partial output to ``--resume``). With ``--json``,
one object per document: ``html`` and the counts of
:class:`~transformer.inference.html.HtmlTranslation`.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from transformer.cli.common import progress
from transformer.cli.decoding import translator_of
from transformer.errors import InputError

log = logging.getLogger("transformer")

# flags whose output is per line of text, not per document
_TEXT_ONLY = (("nbest", "--nbest"), ("alignments", "--alignments"), ("constraints", "--constraints"),
              ("glossary", "--glossary"), ("target_prefix", "--target-prefix"),
              ("target_prefix_file", "--target-prefix-file"), ("resume", "--resume"))


def _documents(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(document, name for errors) for each input document."""
    if args.sentences and args.input is not None:
        raise InputError("give snippets as arguments or -i FILE, not both")
    if args.input is not None:
        from transformer.data.text_files import read_text_file

        return [(read_text_file(args.input), str(args.input))]
    if args.sentences:
        return [(s, f"argument {k}") for k, s in enumerate(args.sentences, start=1)]
    data = sys.stdin.buffer.read()
    try:
        return [(data.decode("utf-8"), "<stdin>")]
    except UnicodeDecodeError as err:
        raise InputError(f"<stdin>: not valid UTF-8 (byte 0x{data[err.start:err.start + 1].hex()} "
                         f"at byte offset {err.start})") from None


def run_html(args: argparse.Namespace) -> int:
    for name, flag in _TEXT_ONLY:
        if getattr(args, name, None):
            raise InputError(f"{flag} is not available with --format html (one translation per "
                             "document, its markup placed by alignments)")
    documents = _documents(args)  # read (and refused) before the model is
    from transformer.inference.html import translate_html_batch
    from transformer.inference.html_parse import check_readable

    for text, name in documents:
        check_readable(text, field=name)
    translator = translator_of(args)
    source_prefix: list[int] = []
    if args.tag is not None or args.target_lang is not None:
        from transformer.inference.tags import language_tag, tag_ids

        tag = args.tag if args.tag is not None else language_tag(args.target_lang)
        flag = f"--tag {args.tag}" if args.tag is not None else f"--target-lang {args.target_lang}"
        source_prefix = tag_ids(translator.src_tokenizer, tag, flag=flag)
    found = translate_html_batch(translator, [d for d, _ in documents], split=args.split_sentences,
                                 source_prefix=source_prefix, fields=[n for _, n in documents],
                                 progress=progress(args))
    if args.json:
        rows = [json.dumps({"html": t.html, "sentences": t.sentences, "elements": t.elements,
                            "split_elements": t.split, "empty_elements": t.empty,
                            "engine": translator.engine}, ensure_ascii=False, sort_keys=True) + "\n"
                for t in found]
    else:
        rows = [t.html if args.input is not None or not args.sentences else t.html + "\n"
                for t in found]
    split = sum(t.split for t in found)
    if split:
        log.warning("%d inline element(s) were written in more than one piece: their words were "
                    "not contiguous in the translation", split)
    if args.output is not None:
        from transformer.atomic import atomic_write_bytes

        atomic_write_bytes(args.output, "".join(rows).encode("utf-8"))
        log.info("wrote the translation of %d document(s) to %s", len(found), args.output)
    else:
        sys.stdout.write("".join(rows))
        sys.stdout.flush()
    return 0
