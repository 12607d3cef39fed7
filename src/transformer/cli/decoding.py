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
from transformer.config.decoding import BEAM_SIZE, LENGTH_PENALTY, MAX_LEN_A, MAX_LEN_B

if TYPE_CHECKING:
    from transformer.inference.translator import Translator


def add_decoding_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decoding")
    g.add_argument("--beam", type=int, default=BEAM_SIZE,
                   help=f"beam size; 1 is greedy decoding (default {BEAM_SIZE}, as the paper)")
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


def add_engine(g: argparse._ActionsContainer) -> None:
    """``--engine``: shared by translate, evaluate and serve."""
    g.add_argument("--engine", choices=ENGINES, default="auto",
                   help="what decodes: auto (default): CTranslate2 where it is installed and "
                   "measured faster for this model, precision and CPU kind, else ours; torch: "
                   "ours; ctranslate2: CTranslate2 (pip install 'transformer[convert]'), the run "
                   "converted on first use into RUN_DIR/.cache/. Options CTranslate2 lacks run "
                   "on ours; which engine ran is logged and reported in JSON answers")


def translator_of(args: argparse.Namespace, *, nbest: int | None = None) -> Translator:
    """``--model`` and the decoding flags -> a Translator (:mod:`transformer.inference.loader`)."""
    from transformer.inference.loader import load_translator

    set_threads(args.threads)
    translator = load_translator(
        args.model, beam_size=args.beam, length_penalty=args.length_penalty, nbest=nbest,
        max_len_a=args.max_len_a, max_len_b=args.max_len_b, max_len=args.max_len,
        batch_size=args.batch_size, precision=args.precision, engine=args.engine,
        device=inference_device(args.device, args.precision))
    translator.progress = progress(args)
    return translator
