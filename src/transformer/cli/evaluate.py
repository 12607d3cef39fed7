"""``transformer evaluate``: score a model on a test set with sacreBLEU (BLEU, chrF; TER when asked)."""

from __future__ import annotations

import argparse

from transformer.cli.common import add_json, did_you_mean, emit_json, progress
from transformer.cli.decoding import add_decoding_flags, add_model_dirs, translator_of
from transformer.config.choices import DEFAULT_SCORE_METRICS, SCORE_METRICS, TRANSLATION_CORPORA
from transformer.errors import InputError


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate",
        help="score a model on a test split with sacreBLEU (BLEU, chrF, TER)",
        description="Translate a test set and score it with sacreBLEU on detokenized text: BLEU and "
        "chrF with their signatures, plus BLEU on lowercased 13a-tokenized text; --metrics "
        "bleu,chrf,ter adds TER. The test set is a split of a known corpus (--data multi30k "
        "--split test_2016_flickr, languages from the run) or any pair of files "
        "--src-file/--ref-file.",
    )
    add_model_dirs(p)
    p.add_argument("--data", choices=TRANSLATION_CORPORA,
                   help="a corpus by name (default: the one the run trained on)")
    p.add_argument("--split", help="split of --data (default test_2016_flickr; numbers: test)")
    p.add_argument("--src", help="source language (default: the run's)")
    p.add_argument("--tgt", help="target language (default: the run's)")
    p.add_argument("--src-file", metavar="FILE", help="source sentences, one a line (.gz ok)")
    p.add_argument("--ref-file", metavar="FILE", help="reference translations, line-aligned")
    p.add_argument("--hyp-out", metavar="FILE", help="write the translations to FILE")
    p.add_argument("--metrics", metavar="M[,M]", default=",".join(DEFAULT_SCORE_METRICS),
                   help=f"sacreBLEU metrics, comma-separated: {', '.join(SCORE_METRICS)} (TER: "
                   "edit rate, lower is better) (default: %(default)s)")
    add_json(p)
    add_decoding_flags(p)
    p.set_defaults(handler=run)


def metrics_of(value: str) -> tuple[str, ...]:
    """``--metrics bleu,ter`` as ``("bleu", "ter")``; InputError naming a metric we do not have."""
    names = tuple(dict.fromkeys(name.strip().lower() for name in value.split(",")))
    for name in names:
        if name not in SCORE_METRICS:
            raise InputError(f"--metrics {value!r}: {name!r} is not a metric; "
                             f"{did_you_mean(name, SCORE_METRICS)}")
    return names


def run(args: argparse.Namespace) -> int:
    from transformer.inference.translation_eval import evaluate_translation

    if (args.src_file is None) != (args.ref_file is None):
        raise InputError("give both --src-file and --ref-file, or neither")
    metrics = metrics_of(args.metrics)
    translator = translator_of(args)
    result = evaluate_translation(translator, hyp_out=args.hyp_out, data=args.data,
                                  progress=progress(args),
                                  split=args.split, src=args.src, tgt=args.tgt,
                                  src_file=args.src_file, ref_file=args.ref_file,
                                  split_sentences=args.split_sentences, metrics=metrics)
    opt = translator.options
    if args.json:
        emit_json({"model": str(args.models[0]), "data": result.name, **result.scores.to_dict(),
                   "beam": opt.beam_size, "length_penalty": opt.length_penalty,
                   "engine": translator.engine, "members": list(translator.members),
                   "max_len_a": opt.max_len_a, "max_len_b": opt.max_len_b,
                   "unknown_lines": result.unknown_lines,
                   "hyp_out": args.hyp_out, "split_sentences": args.split_sentences,
                   "cut_sentences": result.cut})
    else:
        print(f"{result.name}: {result.scores.sentences} sentences, beam {opt.beam_size}")
        print(result.scores.summary())
    return 0
