"""``transformer score``: the log-probability of given translations by forced decoding."""

from __future__ import annotations

import argparse
import json
import sys

from transformer.cli.common import (
    add_device_threads,
    add_inference_precision,
    add_model_dir,
    add_progress,
    inference_device,
    progress,
    set_threads,
)


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score",
        help="log-probability of given translations by forced decoding, for filtering and "
        "reranking",
        description="Score each line of --tgt-file as the translation of the same line of "
        "--src-file: the model's log-probability of its tokens and EOS, read by forced decoding "
        "(teacher forcing, as training reads a pair), batched as training batches. Prints one "
        "score per line, the sum in natural log (--normalize: per target token); with --json, "
        "one JSON object per line: line, log_prob, log_prob_per_token, tokens (EOS included), "
        "source_cut. A source longer than the model's positions is cut to fit, as translate "
        "cuts it; a target longer than them is refused, naming its line. Lines are scored as "
        "they are, never split into sentences.",
    )
    add_model_dir(p)
    p.add_argument("--src-file", required=True, metavar="FILE",
                   help="source sentences, one a line (.gz ok)")
    p.add_argument("--tgt-file", required=True, metavar="FILE",
                   help="their translations to score, line-aligned (.gz ok)")
    p.add_argument("--normalize", action="store_true",
                   help="print the log-probability per target token (EOS included) instead of "
                   "the sum")
    p.add_argument("--max-tokens", type=int, default=4096,
                   help="padded positions per batch (default 4096)")
    add_inference_precision(p, what="weights and activations", int8="scores with the float32 "
                            "weights (int8 is a decoding path). Log-softmax in float32")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    add_device_threads(p)
    add_progress(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from transformer.data.parallel import read_lines
    from transformer.inference.scoring import check_pairs, load_scorer, score_pairs

    set_threads(args.threads)
    sources, targets = read_lines(args.src_file), read_lines(args.tgt_file)
    check_pairs(sources, targets, names=(args.src_file, args.tgt_file))  # before the model loads
    scorer = load_scorer(args.model, precision=args.precision, max_tokens=args.max_tokens,
                         device=inference_device(args.device, args.precision))
    scorer.progress = progress(args)
    scores = score_pairs(scorer, sources, targets, names=(args.src_file, args.tgt_file))
    for number, s in enumerate(scores, start=1):
        if args.json:
            line = json.dumps({"line": number, **s.to_dict()}, sort_keys=True)
        else:
            line = f"{s.log_prob_per_token if args.normalize else s.log_prob:.6f}"
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    return 0
