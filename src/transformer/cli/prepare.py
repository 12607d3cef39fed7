"""``transformer prepare``: parallel text -> a prepared data directory (``train --data-dir``)."""

from __future__ import annotations

import argparse
import sys

from transformer.cli.common import add_json, add_progress, emit_json, progress
from transformer.errors import InputError


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "prepare",
        help="parallel text (one or several corpora, with weights) -> a prepared data directory",
        description="Tokenize parallel text once into memory-mapped id files that `transformer "
        "train` reads from DATA_DIR in constant memory: a tokenizer (trained on a sample, or taken "
        "from a run), per split and corpus the ids, offsets and lengths, and manifest.json (the "
        "inputs' hashes, the filters and what they dropped, the weights). Run again on unchanged "
        "inputs it does nothing. Example: transformer prepare --train-src a.en,b.en --train-tgt "
        "a.de,b.de --weights 1,3 --valid-src dev.en --valid-tgt dev.de --vocab-size 8000 "
        "--filter max-len=256,ratio=3,dedup --out data/ab",
    )
    data = p.add_argument_group("data")
    data.add_argument("--train-src", required=True, metavar="FILE[,FILE]",
                      help="training source files, one corpus each, comma-separated (.gz ok)")
    data.add_argument("--train-tgt", required=True, metavar="FILE[,FILE]",
                      help="their target files, in the same order")
    data.add_argument("--weights", metavar="W[,W]", help="how often each corpus is drawn "
                      "relative to the others (an epoch holds as many pairs as all corpora, "
                      "corpus k's share w_k/sum(w)); default: every pair once per epoch")
    data.add_argument("--tags", metavar="TAG[,TAG]", help="one tag per corpus (e.g. >>de<<,>>en<<; "
                      "an empty one leaves its corpus untagged, as ,<BT> for tagged "
                      "back-translation): "
                      "put first in each of that corpus's source sentences (validation corpora "
                      "too, in the same order) as a vocabulary piece of its own, as `transformer "
                      "translate` puts a tag first")
    data.add_argument("--valid-src", metavar="FILE[,FILE]", help="validation source files")
    data.add_argument("--valid-tgt", metavar="FILE[,FILE]", help="validation target files")
    data.add_argument("--filter", metavar="SPEC", help="training pairs to drop or cut, comma-"
                      "separated: max-len=N (a side over N tokens: dropped), ratio=R (one side "
                      "over R times the other's tokens: dropped), dedup (a pair seen before: "
                      "dropped), truncate=N (sides cut to N tokens)")
    tok = p.add_argument_group("tokenizer")
    tok.add_argument("--tokenizer-from", metavar="RUN_DIR",
                     help="use this run's (or model directory's) tokenizer instead of training one")
    tok.add_argument("--vocab-size", type=int, default=8000, help="pieces of a trained tokenizer "
                     "(default 8000)")
    tok.add_argument("--tokenizer-sample", type=int, default=2_000_000, metavar="N",
                     help="sentences the tokenizer trains on, sampled from the training text "
                     "(default 2000000)")
    tok.add_argument("--tokenizer", dest="model_type", choices=("bpe", "unigram"), default="bpe",
                     help="SentencePiece model type (default bpe)")
    tok.add_argument("--separate", action="store_true",
                     help="one vocabulary per language (default: one joint vocabulary)")
    tok.add_argument("--no-byte-fallback", dest="byte_fallback", action="store_false",
                     help="unknown characters become <unk> instead of UTF-8 bytes")
    tok.add_argument("--seed", type=int, default=0, help="seed of the tokenizer's sample (default 0)")
    run = p.add_argument_group("run")
    run.add_argument("--workers", type=int, metavar="N",
                     help="encoding processes (default: every core)")
    run.add_argument("--out", required=True, metavar="DATA_DIR", help="the directory to write")
    add_progress(run)
    add_json(run)
    p.set_defaults(handler=run_prepare)


def _files(flag: str, value: str | None) -> list[str]:
    if value is None:
        return []
    files = [f.strip() for f in value.split(",")]
    if not all(files):
        raise InputError(f"{flag} {value!r}: an empty file name in the list")
    return files


def _weights(value: str | None) -> list[float] | None:
    if value is None:
        return None
    try:
        return [float(w) for w in value.split(",")]
    except ValueError:
        raise InputError(f"--weights {value!r}: expected comma-separated positive numbers, e.g. "
                         "1,3") from None


def _tags(value: str | None) -> list[str] | None:
    return None if value is None else value.split(",")


def run_prepare(args: argparse.Namespace) -> int:
    from transformer.data.prepared.prepare import prepare
    from transformer.data.prepared.request import Filters, PrepareRequest

    sides = {}
    for split in ("train", "valid"):
        src = _files(f"--{split}-src", getattr(args, f"{split}_src"))
        tgt = _files(f"--{split}-tgt", getattr(args, f"{split}_tgt"))
        if len(src) != len(tgt):
            raise InputError(f"--{split}-src names {len(src)} files but --{split}-tgt {len(tgt)}; "
                             "give one target file per source file")
        sides[split] = list(zip(src, tgt, strict=True))
    request = PrepareRequest(
        train=sides["train"], valid=sides["valid"], weights=_weights(args.weights),
        tags=_tags(args.tags),
        tokenizer_from=args.tokenizer_from, vocab_size=args.vocab_size,
        tokenizer_sample=args.tokenizer_sample, joint=not args.separate,
        model_type=args.model_type, byte_fallback=args.byte_fallback, seed=args.seed, filters=Filters.parse(args.filter),
        workers=args.workers, out=args.out, command=["transformer", *sys.argv[1:]],
    )
    summary = prepare(request, progress=progress(args))
    if args.json:
        emit_json(summary)
    elif summary["up_to_date"]:
        print(f"{summary['out']} is up to date with its inputs; nothing to do")
    else:
        import numpy as np

        print(f"prepared {summary['out']}: {summary['train_pairs']:,} training pairs"
              + (f", {summary['valid_pairs']:,} validation pairs" if "valid_pairs" in summary else "")
              + f", ids stored as {np.dtype(summary['id_dtype']).name}")
    return 0
