"""``transformer classify predict``: labels with probabilities for texts from the command line,
stdin or a file; a file with ``-o`` is classified as it is read, resumably."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from transformer.cli.common import add_model_dir, device, emit_json, set_threads
from transformer.errors import InputError

log = logging.getLogger("transformer")


def add_predict(verbs: argparse._SubParsersAction,
                run_flags: Callable[[argparse.ArgumentParser], None]) -> None:
    q = verbs.add_parser(
        "predict", help="predict labels with probabilities",
        description="Print the predicted labels of each text with their probabilities, one line "
        "per text: texts on the command line, in --file (one a line) or on stdin. Long texts are "
        "truncated to the model's limit and empty texts are predicted too; both are counted. "
        "With --file and -o, the file is read and classified a window of texts at a time into "
        "OUT.partial (OUT.progress.json records the texts done), renamed to OUT when complete; "
        "--resume continues a run that was killed. With -o and --json, OUT holds one JSON object "
        "per text (line, text, labels, probabilities) and standard output one summary object.",
    )
    q.add_argument("text", nargs="*", help="texts to classify (default: --file or stdin)")
    add_model_dir(q)
    q.add_argument("-i", "--file", metavar="FILE", help="texts, one a line (plain or .gz)")
    q.add_argument("-o", "--output", metavar="FILE",
                   help="with --file: write the predictions to FILE, as they are made, through "
                   "FILE.partial; an existing FILE.partial is refused unless --resume")
    q.add_argument("--resume", action="store_true",
                   help="with --file and -o: continue the interrupted run that left "
                   "FILE.partial (same input, options and model, else refused)")
    run_flags(q)
    q.set_defaults(handler=run_predict)


def _read_texts(args: argparse.Namespace) -> list[str]:
    """Texts from the command line, a file (one a line) or stdin."""
    if args.text:
        if args.file is not None:
            raise InputError("give texts on the command line or --file, not both")
        return list(args.text)
    if args.file is not None:
        from transformer.data.text_files import iter_file_lines

        return [text for _, text in iter_file_lines(args.file)]
    lines = sys.stdin.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _plain(chosen: list[tuple[str, float]]) -> str:
    return ", ".join(f"{name} {p:.3f}" for name, p in chosen) if chosen else "(none)"


def run_predict(args: argparse.Namespace) -> int:
    set_threads(args.threads)
    if args.output is not None and (args.file is None or args.text):
        raise InputError("-o writes the predictions of --file FILE: give --file (and no texts)")
    if args.resume and args.output is None:
        raise InputError("--resume continues an interrupted file classification: it needs "
                         "--file FILE and -o FILE")
    if args.output is not None:
        from transformer.inference.file_job import check_start

        check_start(args.output, resume=args.resume)  # before the model is read
    from transformer.inference.loader import load_classifier

    classifier = load_classifier(args.model, device=device(args.device))
    if args.output is not None:
        return _predict_file(args, classifier)
    texts = _read_texts(args)
    out = classifier.predict(texts)
    if out.num_truncated or out.num_empty:
        log.warning("%d of %d texts truncated to %d tokens, %d empty", out.num_truncated, len(texts),
                    classifier.max_tokens, out.num_empty)
    if args.json:
        emit_json({"model": str(args.model), "multi_label": classifier.multi_label,
                   "labels": list(classifier.label_names), "max_tokens": classifier.max_tokens,
                   "num_texts": len(texts), "num_truncated": out.num_truncated,
                   "num_empty": out.num_empty, "predictions": out.to_rows(texts)})
        return 0
    for i in range(len(texts)):
        print(_plain(out.labels(i)))
    return 0


def _predict_file(args: argparse.Namespace, classifier: Any) -> int:
    """``--file IN -o OUT``: a window of texts at a time, resumably
    (:func:`transformer.inference.file_job.write_resumably`)."""
    from transformer.config.decoding import FILE_WINDOW_TEXTS
    from transformer.data.text_files import iter_file_lines
    from transformer.inference.file_job import model_fingerprint, write_resumably

    counts = {"num_truncated": 0, "num_empty": 0}

    def render(records: Sequence[Sequence[str]], first: int) -> str:
        texts = [r[0] for r in records]
        out = classifier.predict(texts)
        counts["num_truncated"] += out.num_truncated
        counts["num_empty"] += out.num_empty
        if not args.json:
            return "".join(_plain(out.labels(i)) + "\n" for i in range(len(texts)))
        return "".join(json.dumps({"line": n, **row}, ensure_ascii=False, sort_keys=True) + "\n"
                       for n, row in enumerate(out.to_rows(texts), start=first))

    fingerprint = {"verb": "classify predict", "model": model_fingerprint(args.model),
                   "json": args.json, "window": FILE_WINDOW_TEXTS}
    records = ((text,) for _, text in iter_file_lines(args.file))
    total = write_resumably(args.output, records, window=FILE_WINDOW_TEXTS, render=render,
                            fingerprint=fingerprint, resume=args.resume, source=args.file)
    if counts["num_truncated"] or counts["num_empty"]:
        log.warning("this run: %d texts truncated to %d tokens, %d empty",
                    counts["num_truncated"], classifier.max_tokens, counts["num_empty"])
    if args.json:
        emit_json({"model": str(args.model), "multi_label": classifier.multi_label,
                   "labels": list(classifier.label_names), "max_tokens": classifier.max_tokens,
                   "num_texts": total, "output": str(args.output), **counts})
    else:
        log.info("wrote the predictions of %d texts to %s", total, args.output)
    return 0
