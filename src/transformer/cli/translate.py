"""``transformer translate``: lines from stdin, a file, or an interactive prompt."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from itertools import zip_longest
from pathlib import Path
from typing import Any

from transformer.cli.common import progress
from transformer.cli.decoding import (
    add_decoding_flags,
    add_model_dirs,
    add_option_flag,
    translator_of,
)
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
        "'LINE<tab>SCORE<tab>TRANSLATION'; with --json, one JSON object per input line, with the "
        "model's log-probability of the translation (log_prob: its decoded tokens' log-softmax "
        "summed, EOS included, target prefix excluded, no length penalty) and its average per "
        "token (log_prob_per_token). A line "
        "with characters the model's vocabulary lacks gets a warning on standard error (in --json: unknown_pieces); they come out as ⁇.",
    )
    add_model_dirs(p)
    p.add_argument("sentences", nargs="*", metavar="SENTENCE",
                   help="sentences to translate (quote each); not with -i")
    p.add_argument("-i", "--input", metavar="FILE", help="read sentences from FILE (.gz ok)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write translations to FILE: with -i, as they are made, into "
                   "FILE.partial (FILE.progress.json records the lines done), renamed to FILE "
                   "when complete; an existing FILE.partial is refused unless --resume")
    p.add_argument("--resume", action="store_true",
                   help="with -i and -o: continue the interrupted run that left FILE.partial "
                   "(same input, options and model, else refused), to the bytes an "
                   "uninterrupted run writes")
    add_option_flag(p, "nbest")
    p.add_argument("--format", choices=("text", "html"), default="text",
                   help="text (default): one translation per line; html: the input is an HTML "
                   "document (each SENTENCE argument, all of standard input, or -i FILE), written "
                   "back with its markup and its text translated (see 'Translate HTML' in the docs)")
    p.add_argument("--json", action="store_true", help="one JSON object per input line")
    add_option_flag(p, "alignments")
    prefix = p.add_mutually_exclusive_group()
    add_option_flag(prefix, "target_prefix")
    prefix.add_argument("--target-prefix-file", metavar="FILE",
                        help="one target prefix per input line (an empty line: none), as "
                        "--target-prefix; the line counts must match")
    tags = p.add_mutually_exclusive_group()
    tags.add_argument("--tag", metavar="TAG",
                      help="put the piece TAG before every source sentence (a model trained "
                      "on tagged corpora: the tag chooses the direction or domain); refused when "
                      "the model's source vocabulary has no such piece")
    tags.add_argument("--target-lang", metavar="ID",
                      help="a multi-target model (an imported OPUS-MT one): translate into "
                      "language ID, by its '>>ID<<' piece (GET /v1/models lists them as "
                      "target_langs); refused when the model has no such tag")
    terms = p.add_argument_group("terminology (lexically constrained beam search)")
    terms.add_argument("--constraints", action="store_true",
                       help="each input line is 'SOURCE<tab>PHRASE<tab>PHRASE...' (fairseq's "
                       "format): its translation must contain every PHRASE (as the target "
                       "tokenizer splits it), anywhere and in any order; a line with phrases is "
                       "translated whole. Beam search with dynamic beam allocation (any --beam, "
                       "1 included); not with --sampling. The whole input is read first")
    terms.add_argument("--glossary", metavar="FILE",
                       help="a TSV file of 'SOURCE TERM<tab>TARGET TERM' lines: wherever a source "
                       "term occurs in a line (whole words, case-sensitive), its target term is "
                       "a constraint of that line (with --constraints, besides the line's own)")
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


def _prefix_lines(path: str | None) -> list[str] | None:
    """The lines of ``--target-prefix-file`` (None without one)."""
    if path is None:
        return None
    from transformer.data.parallel import read_lines

    return list(read_lines(path))


def _check_counts(prefix_file: str, prefixes: int, source: str, lines: int) -> None:
    if prefixes != lines:
        raise InputError(f"--target-prefix-file {prefix_file}: {prefixes} lines, but {source} has "
                         f"{lines}; give one prefix (or an empty line) per input line")


def _file_records(args: argparse.Namespace) -> Iterator[tuple[str, ...]]:
    """``-i``'s lines, each with its ``--target-prefix-file`` line when there is one, read in
    step (stripped as :func:`~transformer.data.parallel.read_lines` strips them)."""
    from transformer.data.text_files import iter_file_lines

    lines = (text.strip() for _, text in iter_file_lines(args.input))
    if args.target_prefix_file is None:
        yield from ((line,) for line in lines)
        return
    prefixes = (text.strip() for _, text in iter_file_lines(args.target_prefix_file))
    for count, (line, prefix) in enumerate(zip_longest(lines, prefixes)):
        if line is None or prefix is None:
            more = sum(1 for _ in (prefixes if line is None else lines))
            counts = (count, count + 1 + more) if line is None else (count + 1 + more, count)
            _check_counts(args.target_prefix_file, counts[1], args.input, counts[0])
        yield (line, prefix)


def _constrained(args: argparse.Namespace, translator: Any, lines: list[str], source: str,
                 first: int = 1) -> tuple[list[str], list[list[str]]]:
    """The sources of input ``lines`` (the first is line ``first``) and each one's target phrases
    (``--constraints``' own, then the ``--glossary``'s), every phrase checked against the target
    tokenizer (InputError naming the file and line)."""
    from transformer.inference.glossary import (
        check_phrases,
        merged_phrases,
        read_glossary,
        split_constrained,
    )

    def where(number: int) -> str:
        return f"{source}, line {number}"

    pairs = [split_constrained(line, where=where(n)) if args.constraints else (line, [])
             for n, line in enumerate(lines, start=first)]
    texts = [text for text, _ in pairs]
    glossary = [] if args.glossary is None else read_glossary(args.glossary, check=translator.phrase_ids)
    phrases = merged_phrases(texts, [own for _, own in pairs], glossary)
    check_phrases(phrases, translator.phrase_ids, lambda i: where(first + i))
    return texts, phrases


def _lines_of(args: argparse.Namespace, t: Any, number: int, unknown: int = 0,
              engine: str = "torch") -> list[str]:
    """The output lines of translation ``t`` of input line ``number`` (which has ``unknown``
    pieces the vocabulary lacks; ``engine`` decoded it)."""
    if args.json:
        item = {"line": number, "engine": engine, "unknown_pieces": unknown,
                **t.to_dict(text_key="translation", nbest=bool(args.nbest), alignments=args.alignments)}
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
    if args.format == "html":
        from transformer.cli.translate_html import run_html

        return run_html(args)
    from transformer.inference.unknown import UnknownPieces

    if args.sentences and args.input is not None:
        raise InputError("give sentences as arguments or -i FILE, not both")
    if args.resume and (args.input is None or args.output is None):
        raise InputError("--resume continues an interrupted file translation: it needs -i FILE "
                         "and -o FILE")
    from transformer.inference.lines import stream_lines, translate_lines

    if args.alignments and args.nbest and not args.json:
        raise InputError("--alignments with --nbest needs --json (the best translation's "
                         "alignments go beside its n-best list)")
    if args.input is not None and args.target_prefix_file is not None:
        from transformer.data.text_files import iter_file_lines

        next(iter_file_lines(args.target_prefix_file))  # a missing or empty file: refused now
    if args.input is not None and args.output is not None:
        from transformer.inference.file_job import check_start

        check_start(args.output, resume=args.resume)  # before the model is read
    constrained = args.constraints or args.glossary is not None
    if constrained and args.sampling:
        raise InputError("--constraints and --glossary need beam search, not --sampling")
    if args.glossary is not None:  # its form checked before the model is read
        from transformer.inference.glossary import read_glossary

        read_glossary(args.glossary)
    prefixes = None if args.input is not None else _prefix_lines(args.target_prefix_file)
    translator = translator_of(args)
    src_lang, tgt_lang = translator.record.languages
    # plain text shows no log-probabilities
    how: dict[str, Any] = dict(split=args.split_sentences, src_lang=src_lang, tgt_lang=tgt_lang,
                               source_prefix=_tag_ids(args, translator), log_probs=bool(args.json),
                               progress=progress(args))
    source = args.input or ("argument" if args.sentences else "<stdin>")
    unknown = UnknownPieces(translator.src_tokenizer, source=source)
    if args.input is not None:
        _translate_file(args, translator, how, unknown)
        _warn_truncated(translator)
        return 0
    if args.sentences or prefixes is not None or constrained:  # whole input first
        lines = list(args.sentences or _stdin_lines())
        if constrained:
            lines, how["constraints"] = _constrained(args, translator, lines, source)
        sources = list(unknown.watch(lines))
        if prefixes is not None:
            _check_counts(args.target_prefix_file, len(prefixes), source, len(sources))
            how["prefixes"] = prefixes
        results: Any = translate_lines(translator, sources, **how)
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
    _warn_truncated(translator)
    return 0


def _tag_ids(args: argparse.Namespace, translator: Any) -> list[int]:
    """``--tag`` / ``--target-lang``: the ids of the piece put before every source sentence."""
    if args.tag is None and args.target_lang is None:
        return []
    from transformer.inference.tags import language_tag, tag_ids

    tag = args.tag if args.tag is not None else language_tag(args.target_lang)
    flag = f"--tag {args.tag}" if args.tag is not None else f"--target-lang {args.target_lang}"
    return tag_ids(translator.src_tokenizer, tag, flag=flag)


def _warn_truncated(translator: Any) -> None:
    if translator.truncated:
        log.warning("%d source sentences were longer than the model's %d positions and were cut",
                    translator.truncated, translator.config.max_len)


def _translate_file(args: argparse.Namespace, translator: Any, how: dict[str, Any],
                    unknown: Any) -> None:
    """``-i FILE``: read, translated and written a window of lines at a time (sorted by length
    within it), to standard output or, resumably, to ``-o``
    (:func:`transformer.inference.file_job.write_resumably`)."""
    from transformer.config.decoding import FILE_WINDOW_BATCHES
    from transformer.inference.file_job import model_fingerprint, windows, write_resumably
    from transformer.inference.lines import translate_lines

    window = FILE_WINDOW_BATCHES * translator.batch_size

    def render(records: Sequence[Sequence[str]], first: int) -> str:
        lines = [r[0] for r in records]
        extra: dict[str, Any] = {"prefixes": [r[1] for r in records]} if args.target_prefix_file else {}
        if args.constraints or args.glossary is not None:
            lines, extra["constraints"] = _constrained(args, translator, lines, args.input, first)
        for n, line in enumerate(lines, start=first):
            unknown.check(n, line)
        found = translate_lines(translator, lines, first_line=first, **how, **extra)
        return "".join(f"{line}\n" for n, t in enumerate(found, start=first) for line in
                       _lines_of(args, t, n, unknown.lines.pop(n, 0), translator.engine))

    if args.output is None:
        number = 1
        for chunk in windows(_file_records(args), window):
            sys.stdout.write(render(chunk, number))
            sys.stdout.flush()
            number += len(chunk)
        return
    fingerprint = {
        "verb": "translate", "model": _models_fingerprint(args, translator, model_fingerprint), "engine": translator.engine,
        "precision": str(translator.precision), "window": window,
        "batch_size": translator.batch_size, "options": _jsonable(translator.options),
        "split": args.split_sentences, "json": args.json, "nbest": args.nbest,
        "alignments": args.alignments, "target_prefix_file": args.target_prefix_file is not None,
        "source_tag": how["source_prefix"], "constraints": args.constraints,
        "glossary": args.glossary}
    count = write_resumably(args.output, _file_records(args), window=window, render=render,
                            fingerprint=fingerprint, resume=args.resume, source=args.input)
    log.info("wrote the translations of %d lines to %s", count, args.output)


def _models_fingerprint(args: argparse.Namespace, translator: Any, fingerprint: Any) -> Any:
    """What identifies the model that decodes: the run's fingerprint, or, for an ensemble, each
    run's record and every member's weights (a snapshot's or the run's)."""
    if not translator.members:
        return fingerprint(args.models[0])
    from transformer.model_dir.cache import file_sha256

    return {"runs": [fingerprint(m) for m in args.models],
            "members": [file_sha256(Path(path)) for path in translator.members]}


def _jsonable(options: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return json.loads(json.dumps(asdict(options), default=str))
