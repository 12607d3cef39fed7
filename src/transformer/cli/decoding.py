"""The decoding flags of ``translate`` and ``evaluate``, declared once, and the translator they
describe."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from transformer.cli.common import (
    add_device_threads,
    add_progress,
    inference_device,
    progress,
    set_threads,
)
from transformer.config.choices import ENGINES, INFERENCE_PRECISIONS
from transformer.config.decoding import (
    BEAM_SIZE,
    LENGTH_PENALTY,
    MAX_LEN_A,
    MAX_LEN_B,
    NO_REPEAT_NGRAM,
    REPETITION_PENALTY,
    SAMPLING_TOPK,
    SAMPLING_TOPP,
    TEMPERATURE,
)

if TYPE_CHECKING:
    from transformer.inference.translator import Translator


def add_decoding_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decoding")
    g.add_argument("--beam", type=int,
                   help=f"beam size; 1 is greedy decoding (default {BEAM_SIZE}, as the paper; "
                   "1 with --sampling, which keeps no beam)")
    g.add_argument("--length-penalty", type=float, default=LENGTH_PENALTY,
                   help="GNMT length penalty alpha of beam search "
                   f"(default {LENGTH_PENALTY}, as the paper)")
    g.add_argument("--max-len-a", type=float,
                   help="a translation has at most a * source tokens + b tokens "
                   f"(default: the run's training setting, else {MAX_LEN_A})")
    g.add_argument("--max-len-b", type=int,
                   help=f"see --max-len-a (default: the run's, else {MAX_LEN_B})")
    g.add_argument("--max-len", type=int, help="absolute cap in tokens (default: model positions)")
    g.add_argument("--batch-size", type=int, default=64,
                   help="sentences decoded at once (default 64)")
    g.add_argument("--precision", choices=INFERENCE_PRECISIONS, default="auto",
                   help="weights and activations while decoding: auto (default): bf16 where "
                   "this CPU or GPU runs it natively and a short probe decodes faster, else "
                   "fp32; fp32; bf16; int8: the decoder's linear layers with int8 weights "
                   "made once (always on the CPU). Beam scores stay float32")
    add_engine(g)
    g.add_argument("--no-split", dest="split_sentences", action="store_false",
                   help="translate each line whole; by default a line is split into sentences "
                   "(sentencex, in the run's source language), they are translated one by one "
                   "and joined with a space. Either way a sentence longer than the model's "
                   "positions is cut at its last comma or space that fits, never truncated")
    add_device_threads(g)
    add_progress(g)
    add_steering_flags(p)


def add_engine(g: argparse._ActionsContainer) -> None:
    """``--engine``: shared by translate, evaluate and serve."""
    g.add_argument("--engine", choices=ENGINES, default="auto",
                   help="what decodes: auto (default): CTranslate2 where it is installed and "
                   "measured faster for this model, precision and CPU kind, else ours; torch: "
                   "ours; ctranslate2: CTranslate2 (pip install 'transformer[convert]'), the run "
                   "converted on first use into RUN_DIR/.cache/. Options CTranslate2 lacks run "
                   "on ours; which engine ran is logged and reported in JSON answers")


def add_steering_flags(p: argparse.ArgumentParser) -> None:
    """Sampling and the repetition guards (Hugging Face ``generate``'s definitions)."""
    g = p.add_argument_group("sampling and repetition guards")
    g.add_argument("--sampling", action="store_true",
                   help="draw each token from the model's distribution instead of searching for "
                   "the most probable translation (translate's n-best gives several samples a "
                   "sentence); not with --beam above 1")
    g.add_argument("--sampling-topk", type=int, metavar="K",
                   help="with --sampling: draw only among the K most probable tokens "
                   f"(default {SAMPLING_TOPK}: all; 1 is greedy decoding)")
    g.add_argument("--sampling-topp", type=float, metavar="P",
                   help="with --sampling: draw only among the fewest most probable tokens whose "
                   f"probabilities sum to at least P (nucleus sampling; default {SAMPLING_TOPP:g}: all)")
    g.add_argument("--temperature", type=float, metavar="T",
                   help="with --sampling: divide the logits by T before the cuts (below 1: "
                   f"surer, above 1: more varied; default {TEMPERATURE:g})")
    g.add_argument("--seed", type=int, metavar="N",
                   help="with --sampling: the same seed gives the same samples for the same "
                   "input line, whatever the batch (default: a fresh seed each run)")
    g.add_argument("--no-repeat-ngram", type=int, metavar="N",
                   help="no N-gram of target tokens occurs twice in a translation "
                   f"(Hugging Face's no_repeat_ngram_size; default {NO_REPEAT_NGRAM}: off)")
    g.add_argument("--repetition-penalty", type=float, metavar="R",
                   help="a token already in the translation has its logit divided by R when "
                   "positive, multiplied by R when negative (Hugging Face's repetition_penalty; "
                   f"default {REPETITION_PENALTY:g}: off; 1.2 is a common choice)")


def translator_of(args: argparse.Namespace, *, nbest: int | None = None,
                  target_prefix: str | None = None) -> Translator:
    """``--model`` and the decoding flags -> a Translator (:mod:`transformer.inference.loader`)."""
    from transformer.inference.loader import load_translator

    set_threads(args.threads)
    translator = load_translator(
        args.model, beam_size=args.beam, length_penalty=args.length_penalty, nbest=nbest,
        max_len_a=args.max_len_a, max_len_b=args.max_len_b, max_len=args.max_len,
        sampling=args.sampling or None, sampling_topk=args.sampling_topk,
        sampling_topp=args.sampling_topp, temperature=args.temperature, seed=args.seed,
        target_prefix=target_prefix, no_repeat_ngram=args.no_repeat_ngram,
        repetition_penalty=args.repetition_penalty, batch_size=args.batch_size,
        precision=args.precision, engine=args.engine,
        device=inference_device(args.device, args.precision))
    translator.progress = progress(args)
    return translator
