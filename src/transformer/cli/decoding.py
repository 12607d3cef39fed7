"""The decoding flags of ``translate`` and ``evaluate``, declared once, and the translator they
describe."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from transformer.cli.common import (
    add_device_threads,
    add_inference_precision,
    add_progress,
    inference_device,
    set_threads,
)
from transformer.config.choices import ENGINES
from transformer.config.decoding import FIELDS, OptionField
from transformer.errors import InputError

if TYPE_CHECKING:
    from transformer.inference.translator import Translator

_TYPES = {"int": int, "float": float, "text": str, "phrases": str}
_FIELD = {f.name: f for f in FIELDS}


def add_option_flag(g: argparse._ActionsContainer, name: str) -> None:
    """The flag of the decoding option ``name``, from its row of the options' table
    (:data:`transformer.config.decoding.FIELDS`): its value lands in ``args.<name>``, None when
    not given (the run's value or the default then applies)."""
    field: OptionField = _FIELD[name]
    assert field.flag is not None, name
    metavar = field.metavar or field.flag.lstrip("-").replace("-", "_").upper()
    if field.kind == "bool":
        g.add_argument(field.flag, dest=name, action="store_true", default=None, help=field.help)
    else:
        g.add_argument(field.flag, dest=name, type=_TYPES[field.kind], metavar=metavar, help=field.help)


def add_model_dirs(p: argparse.ArgumentParser) -> None:
    """``--model`` (repeatable: an ensemble of runs) and ``--ensemble-last K``, of ``translate``
    and ``evaluate``."""
    p.add_argument("--model", dest="models", action="append", required=True, metavar="RUN_DIR",
                   help="model directory; repeated (--model A --model B), an ensemble of runs "
                   "that share their tokenizers: their log-probabilities averaged at each step, "
                   "on our engine")
    p.add_argument("--ensemble-last", type=int, metavar="K",
                   help="decode with the run's last K snapshots together (an ensemble; "
                   "training with average-last N keeps N), not its best weights")


def add_decoding_flags(p: argparse.ArgumentParser) -> None:
    """The decoding flags ``translate`` and ``evaluate`` share (those of the options' table that
    are not ``translate``'s own), and how to run the decoding."""
    g = p.add_argument_group("decoding")
    for field in FIELDS:
        if field.group == "decoding" and field.flag is not None:
            add_option_flag(g, field.name)
    g.add_argument("--batch-size", type=int, default=64,
                   help="sentences decoded at once (default 64)")
    add_inference_precision(g, what="weights and activations while decoding",
                            int8="the decoder's linear layers with int8 weights made once "
                            "(always on the CPU). Beam scores stay float32")
    add_engine(g)
    g.add_argument("--no-split", dest="split_sentences", action="store_false",
                   help="translate each line whole; by default a line is split into sentences "
                   "(sentencex, in the run's source language), they are translated one by one "
                   "and joined with a space. Either way a sentence longer than the model's "
                   "positions is cut at its last comma or space that fits, never truncated")
    add_device_threads(g)
    add_progress(g)
    steering = p.add_argument_group("sampling and repetition guards")
    for field in FIELDS:
        if field.group == "sampling and repetition guards" and field.flag is not None:
            add_option_flag(steering, field.name)


def add_engine(g: argparse._ActionsContainer) -> None:
    """``--engine``: shared by translate, evaluate and serve."""
    g.add_argument("--engine", choices=ENGINES, default="auto",
                   help="what decodes: auto (default): CTranslate2 where it is installed and "
                   "measured faster for this model, precision and CPU kind, else ours; torch: "
                   "ours; ctranslate2: CTranslate2 (pip install 'transformer[convert]'), the run "
                   "converted on first use into RUN_DIR/.cache/. Options CTranslate2 lacks run "
                   "on ours; which engine ran is logged and reported in JSON answers")


def read_phrases(path: str, *, flag: str) -> tuple[str, ...]:
    """A file of phrases, one a line (blank lines skipped); InputError naming ``flag`` and the
    file when it is missing, unreadable or holds none."""
    from transformer.data.text_files import iter_file_lines

    phrases = tuple(text.strip() for _, text in iter_file_lines(path) if text.strip())
    if not phrases:
        raise InputError(f"{flag} {path}: no phrases (one a line)")
    return phrases


def options_of_args(args: argparse.Namespace) -> dict[str, object]:
    """The decoding options the flags gave (those of the options' table this verb has), None
    for each one not given; a phrases flag's file read."""
    given: dict[str, object] = {}
    for field in FIELDS:
        if field.flag is None or not hasattr(args, field.name):
            continue
        value = getattr(args, field.name)
        given[field.name] = read_phrases(value, flag=field.flag) if field.reads_file and value else value
    return given


def translator_of(args: argparse.Namespace) -> Translator:
    """``--model`` and the decoding flags -> a Translator (:mod:`transformer.inference.loader`;
    several ``--model`` or ``--ensemble-last``: :mod:`transformer.inference.ensemble`),
    whose options are the flags'; what differs per call (a tag, log-probabilities, a progress
    bar) the verb gives each call."""
    set_threads(args.threads)
    how = dict(batch_size=args.batch_size, precision=args.precision, engine=args.engine,
               device=inference_device(args.device, args.precision), **options_of_args(args))
    if len(args.models) > 1 or args.ensemble_last is not None:
        from transformer.inference.ensemble import load_ensemble_translator

        return load_ensemble_translator(args.models, last=args.ensemble_last, **how)
    from transformer.inference.loader import load_translator

    return load_translator(args.models[0], **how)
