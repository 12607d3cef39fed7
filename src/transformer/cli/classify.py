"""``transformer classify train/predict/evaluate``: encoder-only text classification."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from transformer.cli.classify_predict import add_predict
from transformer.cli.common import (
    MODEL_FLAGS,
    RUN_FLAGS,
    add_config_file,
    add_device_threads,
    add_flags,
    add_json,
    add_model_dir,
    add_model_flags,
    add_progress,
    as_input_error,
    device,
    emit_json,
    flag_of,
    overrides,
    progress,
    set_threads,
)
from transformer.cli.training_run import add_resume, config_file, end_rank, resume_changes
from transformer.config.choices import (
    CLASSIFIER_CORPORA,
    CLASSIFIER_SCHEDULES,
    POOLING,
    POS_WEIGHTS,
    TOKENIZER_TYPES,
)
from transformer.config.presets import CLASSIFIER_PRESETS
from transformer.errors import InputError

log = logging.getLogger("transformer")

# flags of the classifier run only: flag, key, type, help, old spellings
CLASSIFIER_FLAGS = (
    ("--lr", "lr", float, "the peak learning rate (default: the preset's, see `config show`)", ()),
    ("--schedule", "schedule", CLASSIFIER_SCHEDULES, "learning-rate schedule after the linear "
     "warmup (default: the preset's, see `config show`)", ()),
    ("--tokenizer", "tokenizer_type", TOKENIZER_TYPES,
     "SentencePiece model type (default: the preset's, see `config show`)", ()),
    ("--character-coverage", "character_coverage", float, "SentencePiece character coverage", ()),
    ("--pooling", "pooling", POOLING, "the text's vector: the mean of the encoder's outputs or "
     "the CLS position's", ()),
    ("--batch-tokens", "batch_tokens", int, "padded positions per batch", ()),
    ("--pos-weight", "pos_weight", POS_WEIGHTS, "multi-label positive weights", ()),
)


# every flag whose field a configuration error may name (see common.flag_names)
MESSAGE_FLAGS = (MODEL_FLAGS, RUN_FLAGS, CLASSIFIER_FLAGS)


def _column(value: str) -> str | int:
    """A column given by header name, or by 0-based index when it is all digits."""
    return int(value) if value.isdigit() else value


def _file_columns(q: argparse._ArgumentGroup, *, default: bool) -> None:
    same = " (default: as in training)"
    q.add_argument("--text-column", type=_column, default="text" if default else None,
                   help="text column: header name, or 0-based index" + (" (default text)" if default
                                                                       else same))
    q.add_argument("--label-column", type=_column, default="label" if default else None,
                   help="label column: name or index" + (" (default label)" if default else same))
    q.add_argument("--format", choices=("tsv", "csv", "jsonl"),
                   help="file format (default: from the name)")
    q.add_argument("--label-separator", default="," if default else None,
                   help="between several labels in one cell" + (" (default ,)" if default else same))


def _columns(args: argparse.Namespace) -> dict[str, object]:
    return {"text_column": args.text_column, "label_column": args.label_column,
            "format": args.format, "label_separator": args.label_separator}


def _run_flags(p: argparse.ArgumentParser) -> None:
    add_device_threads(p)
    add_json(p)


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "classify",
        help="encoder-only text classification: train, predict, evaluate",
        description="Text classification with the Transformer encoder (mean or CLS pooling and a "
        "linear head): single-label (softmax cross-entropy) or multi-label (one sigmoid per label, "
        "BCEWithLogits, per-label thresholds tuned on the validation split and stored with the "
        "model). Corpora by name: nsmc (Korean movie-review sentiment), goemotions (28 emotions, "
        "multi-label); or any TSV/CSV/JSONL file.",
    )
    verbs = p.add_subparsers(dest="classify_verb", metavar="SUBVERB")

    def usage(args: argparse.Namespace) -> int:
        p.print_help(sys.stderr)
        return 2

    p.set_defaults(handler=usage)
    _add_train(verbs)
    add_predict(verbs, _run_flags)
    _add_evaluate(verbs)


def _add_train(verbs: argparse._SubParsersAction) -> None:
    t = verbs.add_parser(
        "train", help="train a classifier",
        description="Train a classifier and write its model directory (config.json with labels "
        "and thresholds, model.safetensors, tokenizer/, metrics.jsonl, results.json). --data nsmc "
        "holds out a validation and a test split of the training file; --data goemotions holds out "
        "a validation split of train (for model selection and thresholds) and reports dev. Presets: "
        "tiny (a smoke test: seconds), nsmc-cpu and goemotions-cpu (each at most 30 minutes on a "
        "2-core CPU); flags override them. Under torchrun every process trains on its shard "
        "(torchrun --nproc-per-node 2 -m transformer classify train ...).",
    )
    src = t.add_argument_group("data")
    src.add_argument("--data", type=str.lower, choices=CLASSIFIER_CORPORA, help="a corpus by name")
    src.add_argument("--train", metavar="FILE", help="training file (TSV, CSV or JSONL; .gz allowed)")
    src.add_argument("--valid", metavar="FILE",
                     help="validation file (default: hold out 10%% of --train)")
    src.add_argument("--test", metavar="FILE", help="test file, reported at the end")
    _file_columns(src, default=True)
    kind = src.add_mutually_exclusive_group()
    kind.add_argument("--multi-label", dest="multi_label", action="store_true", default=None,
                      help="several labels per text (default: detected from the training file)")
    kind.add_argument("--single-label", dest="multi_label", action="store_false")
    src.add_argument("--split-seed", type=int, help="seed of the held-out splits (default 1234)")
    src.add_argument("--data-dir", metavar="DATA_DIR", help="refused: a prepared directory holds "
                     "parallel text for train, not labelled texts; give --train FILE or --data "
                     "NAME")
    t.add_argument("--out", metavar="RUN_DIR", help="model directory to write (default "
                   "runs/classify)")
    t.add_argument("--overwrite", action="store_true", help="replace a model already in --out")
    add_resume(t, t, what="on the data it recorded (read again the same way)")
    t.add_argument("--preset", choices=tuple(CLASSIFIER_PRESETS),
                   help="default: DATA-cpu for --data, else the built-in defaults")
    add_config_file(t)
    t.add_argument("--init-from", metavar="RUN_DIR", help="start the encoder and its embeddings "
                   "from a translation model (a run of train, or import marian's) and take its "
                   "source tokenizer; the encoder's shape is its own (fewer --layers may be "
                   "copied; a contradicting flag is refused)")
    hyper = t.add_argument_group("model and training (override the preset)")
    add_model_flags(hyper, decoder=False)
    add_flags(hyper, (*RUN_FLAGS, *CLASSIFIER_FLAGS))
    add_progress(t)
    _run_flags(t)
    t.set_defaults(handler=run_train, end_process=end_rank)


def _add_evaluate(verbs: argparse._SubParsersAction) -> None:
    e = verbs.add_parser(
        "evaluate", help="accuracy, micro/macro F1 and a per-label table",
        description="Score a classifier on a labelled file (--file) or a corpus split (--data NAME "
        "--split SPLIT; the held-out splits are redrawn exactly as in training): accuracy (exact "
        "match for multi-label), micro and macro F1 and per-label precision, recall and F1.",
    )
    add_model_dir(e)
    e.add_argument("--file", metavar="FILE", help="labelled file (TSV, CSV or JSONL)")
    e.add_argument("--data", type=str.lower, choices=CLASSIFIER_CORPORA, help="a corpus by name")
    e.add_argument("--split", default="test",
                   help="corpus split: train, valid, test (default), or dev for goemotions")
    _file_columns(e.add_argument_group("file columns"), default=False)
    _run_flags(e)
    e.set_defaults(handler=run_evaluate)


def config_of(args: argparse.Namespace) -> tuple[object, str | None, str | None]:
    """``(ClassifierTrainConfig, preset, data)`` of ``classify train``'s arguments (with --config
    the file's configuration and no preset; the flags change single fields)."""
    from transformer.config.presets import classifier_config, classifier_preset_for

    def build() -> tuple[object, str | None, str | None]:
        from_file = config_file(args, task="classification", changes=overrides(args))
        if from_file is not None:
            return from_file, None, args.data
        preset, data = classifier_preset_for(preset=args.preset, data=args.data, train=args.train)
        if args.init_from is not None:
            from transformer.training.init_from import classifier_config_from

            return classifier_config_from(
                args.init_from, preset=args.preset, defaults=preset, overrides=overrides(args),
                name=lambda key, value: flag_of(key, MODEL_FLAGS, RUN_FLAGS, CLASSIFIER_FLAGS),
            ), preset, data
        return classifier_config(preset, overrides(args)), preset, data

    return as_input_error(build, *MESSAGE_FLAGS)


# why classify train takes no prepared directory (see docs/how-to/classification.md)
NO_DATA_DIR = ("a prepared data directory holds parallel text (source and target ids, made by "
               "`transformer prepare` for train), not labelled texts; give the labelled file "
               "with --train FILE (or a corpus with --data NAME): classify train tokenizes it "
               "itself")
def run_train(args: argparse.Namespace) -> int:
    from transformer.training import distributed
    from transformer.training.train_classifier import (
        ClassifierSources,
        resume_classifier,
        train_classifier_run,
        train_or_resume_classifier,
    )

    set_threads(args.threads)
    if args.data_dir is not None:
        raise InputError(f"--data-dir {args.data_dir}: {NO_DATA_DIR}")
    device(args.device)  # a bad name is refused here, naming --device; each rank resolves its own
    main_rank = int(os.environ.get("RANK", "0")) == 0  # under torchrun only rank 0 reports
    if not main_rank:
        logging.getLogger().setLevel(logging.WARNING)
    run = {"device": args.device, "progress": progress(args)}
    try:
        if args.resume is not None and args.resume != "auto":
            summary = as_input_error(lambda: resume_classifier(
                args.resume, **run, **resume_changes(args)), *MESSAGE_FLAGS)
        else:
            config, preset, data = config_of(args)
            sources = ClassifierSources(
                data=data, train=args.train, valid=args.valid, test=args.test,
                columns=_columns(args), split_seed=args.split_seed, multi_label=args.multi_label,
                preset=preset)
            where = {"run_dir": args.out or "runs/classify", "sources": sources,
                     "init_from": args.init_from, **run}
            summary = as_input_error(lambda: train_or_resume_classifier(config, **where)
                                     if args.resume == "auto" else
                                     train_classifier_run(config, overwrite=args.overwrite, **where),
                                     *MESSAGE_FLAGS)
    finally:
        distributed.shutdown()
    if main_rank:
        _report(summary, json_out=args.json)
    return 0


def _report(summary: dict, *, json_out: bool) -> None:
    """What classify train prints: the summary as JSON, or a line and the figures per split."""
    if json_out:
        emit_json(summary)
        return
    print(f"model written to {summary['run_dir']} ({summary['parameters']:,} parameters, "
          f"{summary['steps']} updates, {summary['epochs']} epochs, {summary['train_s']:.0f}s "
          "training)")
    for name, figures in summary["splits"].items():
        print(f"{name:>6}: accuracy {figures['accuracy']:.4f}  micro-F1 {figures['micro_f1']:.4f}  "
              f"macro-F1 {figures['macro_f1']:.4f}  ({figures['num_examples']} texts)")


def run_evaluate(args: argparse.Namespace) -> int:
    set_threads(args.threads)
    from transformer.inference.classifier_eval import evaluate_classifier, evaluation_data
    from transformer.inference.loader import load_classifier

    classifier = load_classifier(args.model, device=device(args.device))
    data = evaluation_data(classifier, data=args.data, split=args.split, file=args.file,
                           **_columns(args))
    result = evaluate_classifier(classifier, data)
    if args.json:
        emit_json({"model": str(args.model), **result.to_dict()})
    else:
        print(result.format())
    return 0
