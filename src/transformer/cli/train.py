"""``transformer train``: train a translation model (Multi30k by name, or parallel text files)."""

from __future__ import annotations

import argparse
import logging
import os

from transformer.cli.common import (
    MODEL_FLAGS,
    RUN_FLAGS,
    add_config_file,
    add_flags,
    add_model_flags,
    add_training_run,
    as_input_error,
    emit_json,
    flag_of,
    overrides,
    progress,
    set_threads,
)
from transformer.cli.training_run import add_resume, config_file, end_rank, resume_changes
from transformer.config.choices import (
    ON_LONG,
    PRESETS,
    TOKENIZER_TYPES,
    TRANSLATION_CORPORA,
    TRANSLATION_METRICS,
    TRANSLATION_SCHEDULES,
)
from transformer.config.presets import TRANSLATION_PRESETS

# flags of the translation run only: flag, key, type, help, old spellings
TRANSLATION_FLAGS = (
    ("--lr", "lr", float, "the peak learning rate of inverse_sqrt and constant (noam: unused, see "
     "--lr-scale; default: the preset's, see `config show`)", ()),
    ("--schedule", "schedule", TRANSLATION_SCHEDULES,
     "learning-rate schedule (default: the preset's, see `config show`)", ()),
    ("--src", "src_lang", str, "source language of --data (default en)", ()),
    ("--tgt", "tgt_lang", str, "target language of --data (default de)", ()),
    ("--tokenizer", "model_type", TOKENIZER_TYPES, "SentencePiece model type (default bpe)",
     ("--model-type",)),
    ("--max-tokens", "max_tokens", int,
     "tokens per micro-batch and process, padding included (default: the preset's, see `config show`)", ()),
    ("--accumulate", "accumulate", int, "micro-batches per optimizer update (default 1)", ()),
    ("--lr-scale", "lr_scale", float, "noam: factor on equation 3 (default 1)", ()),
    ("--cooldown", "cooldown", int, "lower the rate linearly towards 0 over the last N updates "
     "before --max-steps (default 0: no cool-down)", ()),
    ("--cooldown-share", "cooldown_share", float, "lower the rate linearly to 0 over the last "
     "share (0-1) of the budget, placed by the time left under --minutes (default: the "
     "preset's, else 0: no cool-down; see `config show`)", ()),
    ("--adam-eps", "adam_eps", float, "Adam epsilon (default 1e-9)", ()),
    ("--log-every", "log_every", int, "updates between log lines (default 50)", ()),
    ("--bleu-sample", "bleu_sample", int,
     "validation sentences translated for BLEU (default 500, or the preset's, see `config "
     "show`; at least the split's size: all of it)", ()),
    ("--average-last", "average_last", int, "keep the weights of the last N validations "
     "(RUN_DIR/snapshots/); at the end their average replaces the model if it validates better",
     ()),
    ("--metric", "metric", TRANSLATION_METRICS, "selects the best model (default bleu)", ()),
    ("--on-long", "on_long", ON_LONG, "pairs longer than --max-len: truncate (default) or filter",
     ()),
)
FILE_FLAGS = ("train_src", "train_tgt", "valid_src", "valid_tgt")
# every flag whose field a configuration error may name (see common.flag_names)
MESSAGE_FLAGS = (MODEL_FLAGS, RUN_FLAGS, TRANSLATION_FLAGS,
                 tuple((f"--{name.replace('_', '-')}", name, str, "", ())
                       for name in ("data", *FILE_FLAGS, "data_dir")))


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a translation model (Multi30k by name, or any parallel text files)",
        description="Train an encoder-decoder Transformer. Data: --data multi30k --src en --tgt de, "
        "or --train-src/--train-tgt (and --valid-src/--valid-tgt) files. The run directory gets "
        "config.json, model.safetensors (best by validation), tokenizer/, checkpoint/ and "
        "metrics.jsonl; --resume RUN_DIR continues exactly. Under torchrun every process trains "
        "on its shard (torchrun --nproc-per-node 2 -m transformer train ...). Without a stop "
        "flag a preset trains 10 epochs (multi30k-cpu: its own budget).",
    )
    data = p.add_argument_group("data")
    data.add_argument("--data", dest="set:data", choices=TRANSLATION_CORPORA,
                      help="a corpus by name (default multi30k)")
    for name in FILE_FLAGS:
        data.add_argument(f"--{name.replace('_', '-')}", dest=f"set:{name}", metavar="FILE",
                          help="parallel text, one sentence a line (.gz ok)")
    data.add_argument("--data-dir", dest="set:data_dir", metavar="DATA_DIR",
                      help="a prepared data directory (transformer prepare): its tokenizer, ids "
                      "and corpus weights, read through memory maps, in place of text files")
    tok = p.add_argument_group("tokenizer")
    tok.add_argument("--joint", dest="set:joint", action="store_true", default=None,
                     help="one vocabulary for both languages (default)")
    tok.add_argument("--separate", dest="set:joint", action="store_false",
                     help="one vocabulary per language")
    tok.add_argument("--no-byte-fallback", dest="set:byte_fallback", action="store_false",
                     default=None, help="unknown characters become <unk> instead of UTF-8 bytes")
    model = p.add_argument_group("model (defaults: the preset's; `transformer config show PRESET` prints them)")
    model.add_argument("--preset", choices=tuple(TRANSLATION_PRESETS),
                       help=f"model shape (default small; {', '.join(PRESETS)}; base and big are "
                       "the paper's Table 3), or a whole recipe: multi30k-cpu is the README's "
                       "one-hour CPU result (shape, optimisation and a 60-minute budget; any flag "
                       "overrides it)")
    add_config_file(model)
    add_model_flags(model)
    train = p.add_argument_group("training")
    add_flags(train, (*RUN_FLAGS, *TRANSLATION_FLAGS))
    train.add_argument("--adam-betas", dest="set:adam_betas", type=float, nargs=2,
                       metavar=("B1", "B2"), help="Adam betas (default 0.9 0.98)")
    run = p.add_argument_group("run")
    run.add_argument("--out", metavar="RUN_DIR", help="run directory (default runs/train)")
    add_resume(p, run, what="on the data it names")
    run.add_argument("--overwrite", action="store_true", help="replace a model already in --out")
    run.add_argument("--init-from", metavar="RUN_DIR", help="fine-tune: start from the weights of "
                     "this model directory (a run, or one made by transformer import marian) with "
                     "its tokenizer and shape (a flag that contradicts them is refused; --dropout "
                     "may change), a fresh optimizer and schedule")
    add_training_run(run, threads_note="a --resume takes the count the run started with, so it "
                     "ends bit for bit as a straight run")
    p.set_defaults(handler=run_train, end_process=end_rank)


# flags whose name is not their key's (see flag_of), for the messages of --init-from
_SWITCHES = {("joint", False): "--separate", ("byte_fallback", False): "--no-byte-fallback"}


def flag_name(key: str, value: object) -> str:
    """The flag that gave ``key`` the value ``value``."""
    return _SWITCHES.get((key, value)) or flag_of(key, *MESSAGE_FLAGS)


def config_of(args: argparse.Namespace) -> object:
    """The TranslationTrainConfig of ``train``'s arguments (the preset, or the --config file,
    then the flags; with --init-from and no file the model's shape and tokenizer are the
    origin's, and with a file the run checks them against the origin's)."""
    from transformer.config.presets import translation_config

    changes = overrides(args)
    if "adam_betas" in changes:
        changes["adam_betas"] = tuple(changes["adam_betas"])
    from_file = as_input_error(lambda: config_file(args, task="translation", changes=changes),
                               *MESSAGE_FLAGS)
    if from_file is not None:
        return from_file
    if args.init_from is not None:
        from transformer.training.init_from import translation_config_from

        return as_input_error(lambda: translation_config_from(
            args.init_from, preset=args.preset, overrides=changes, name=flag_name),
            *MESSAGE_FLAGS)
    return as_input_error(lambda: translation_config(args.preset or "small", changes),
                          *MESSAGE_FLAGS)


def run_train(args: argparse.Namespace) -> int:
    from transformer.training import distributed
    from transformer.training.train_translation import (
        resume_translation,
        start_translation,
        train_or_resume_translation,
    )

    set_threads(args.threads)
    main_rank = int(os.environ.get("RANK", "0")) == 0  # under torchrun only rank 0 reports
    if not main_rank:
        logging.getLogger().setLevel(logging.WARNING)
    try:
        if args.resume == "auto":
            config = config_of(args)
            summary = as_input_error(lambda: train_or_resume_translation(
                config, run_dir=args.out or "runs/train", device=args.device,
                progress=progress(args), init_from=args.init_from), *MESSAGE_FLAGS)
        elif args.resume is not None:
            summary = as_input_error(lambda: resume_translation(
                args.resume, device=args.device, progress=progress(args), **resume_changes(args)),
                *MESSAGE_FLAGS)
        else:
            config = config_of(args)
            summary = as_input_error(lambda: start_translation(
                config, run_dir=args.out or "runs/train", overwrite=args.overwrite,
                device=args.device, progress=progress(args), init_from=args.init_from),
                *MESSAGE_FLAGS)
    finally:
        distributed.shutdown()
    if main_rank:
        if args.json:
            emit_json(summary)
        else:
            best = summary["best_metric"]
            figure = (f"best validation {summary['metric']} {best:.4g} at update "
                      f"{summary['best_step']}" if best is not None else "no validation data")
            print(f"model written to {summary['run_dir']} ({summary['parameters']:,} parameters, "
                  f"{summary['steps']} updates, {summary['epochs']:.2f} epochs, "
                  f"{summary['train_s']:.0f}s, stopped by {summary['stopped_by']}); {figure}")
    return 0
