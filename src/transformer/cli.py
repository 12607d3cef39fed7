"""The ``transformer`` command line. The only module that parses arguments.

Each verb has an ``_add_<verb>`` function that declares its arguments and sets ``handler`` to a
function ``(args) -> int``; handlers import their area lazily so ``transformer --help`` stays fast.

Exit status: 0 success, 2 bad usage or bad input (one line on stderr naming the file, line or
value), 1 internal failure.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from transformer.errors import InputError
from transformer.recipes import RECIPES

log = logging.getLogger("transformer")


def emit_json(obj: Any) -> None:
    """Print one JSON object on stdout (every verb's ``--json``)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, sort_keys=True) + "\n")
    sys.stdout.flush()


def _add_version(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("version", help="print the package and PyTorch versions")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    def run(args: argparse.Namespace) -> int:
        import torch

        from transformer import __version__

        info = {"transformer": __version__, "torch": torch.__version__}
        if args.json:
            emit_json(info)
        else:
            print(f"transformer {info['transformer']} (torch {info['torch']})")
        return 0

    p.set_defaults(handler=run)


def _add_memory(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "memory",
        help="estimate the training memory of a configuration (and measure it with --measure)",
        description="Estimate the peak memory of one training step (Adam): parameters, gradients, "
        "optimizer state, activations and the loss, line by line. --decoder-only applies the seed "
        "tutorial's GPT-2 formula instead (e.g. --decoder-only --decoder-layers 12 --heads 12 "
        "--d-model 768 --vocab-size 50257 --batch-size 8 --tgt-len 1024: 26.68 GB).",
    )
    model = p.add_argument_group("model (a preset, then any field overridden)")
    model.add_argument("--preset", choices=("tiny", "small", "base", "big"), default="base")
    for flag, kind, what in (
        ("--d-model", int, "d_model"), ("--heads", int, "attention heads"),
        ("--encoder-layers", int, "encoder layers"), ("--decoder-layers", int, "decoder layers"),
        ("--d-ff", int, "feed-forward width"), ("--max-len", int, "positions"),
        ("--dropout", float, "dropout"), ("--attention-dropout", float, "attention dropout"),
        ("--activation-dropout", float, "FFN dropout"),
    ):
        model.add_argument(flag, type=kind, help=f"{what} (default: the preset's)")
    model.add_argument("--vocab-size", type=int, default=8000,
                       help="source and target vocabulary (default 8000)")
    model.add_argument("--src-vocab", type=int, help="source vocabulary (default --vocab-size)")
    model.add_argument("--tgt-vocab", type=int, help="target vocabulary (default --vocab-size)")
    model.add_argument("--share-embeddings", action="store_true")
    model.add_argument("--tie-embeddings", action="store_true")
    model.add_argument("--norm-first", action="store_true", help="pre-LN")
    model.add_argument("--activation", choices=("relu", "gelu"))
    model.add_argument("--positional", choices=("sinusoidal", "learned"))
    model.add_argument("--encoder-only", action="store_true", help="a classifier")
    model.add_argument("--num-labels", type=int, default=2, help="classifier labels (default 2)")
    model.add_argument("--pooling", choices=("mean", "cls"), default="mean")
    model.add_argument("--decoder-only", action="store_true",
                       help="the seed's GPT-2 formula (d_ff defaults to 4 x d_model)")
    batch = p.add_argument_group("batch and training")
    batch.add_argument("--batch-size", type=int, default=32, help="rows (default 32)")
    batch.add_argument("--max-tokens", type=int,
                       help="instead of --batch-size: rows that fill this many padded tokens")
    batch.add_argument("--src-len", type=int, default=64, help="source tokens (default 64)")
    batch.add_argument("--tgt-len", type=int, help="target tokens with BOS (default --src-len)")
    batch.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                       help="bf16: autocast; fp16: autocast with a grad scaler (default fp32)")
    batch.add_argument("--device", choices=("cuda", "cpu"),
                       help="what the estimate is for and --measure runs on "
                       "(default: cuda when available, else cpu)")
    batch.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--measure", action="store_true",
                   help="also run real training steps and print the measured peak")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    def run(args: argparse.Namespace) -> int:
        import torch

        from transformer import memory
        from transformer.config import ModelConfig

        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        overrides = {
            name: value for name, value in (
                ("d_model", args.d_model), ("num_heads", args.heads),
                ("num_encoder_layers", args.encoder_layers),
                ("num_decoder_layers", args.decoder_layers), ("d_ff", args.d_ff),
                ("max_len", args.max_len), ("dropout", args.dropout),
                ("attention_dropout", args.attention_dropout),
                ("activation_dropout", args.activation_dropout),
                ("activation", args.activation), ("positional", args.positional),
            ) if value is not None
        }
        for flag in ("share_embeddings", "tie_embeddings", "norm_first"):
            if getattr(args, flag):
                overrides[flag] = True
        src_vocab = args.src_vocab or args.vocab_size
        tgt_vocab = args.tgt_vocab or args.vocab_size
        try:
            if args.decoder_only:
                if args.measure:
                    raise InputError("--measure needs an encoder-decoder or --encoder-only model; "
                                     "--decoder-only is the seed's formula only")
                base = ModelConfig.preset(args.preset, src_vocab_size=src_vocab,
                                          tgt_vocab_size=tgt_vocab)
                d_model = overrides.get("d_model", base.d_model)
                seq_len = args.tgt_len or args.src_len
                batch_size = (memory.batch_for_tokens(args.max_tokens, src_len=seq_len,
                                                      tgt_len=None, encoder_only=True)
                              if args.max_tokens else args.batch_size)
                estimate = memory.seed_formula_estimate(
                    num_layers=overrides.get("num_decoder_layers", base.num_decoder_layers),
                    num_heads=overrides.get("num_heads", base.num_heads), d_model=d_model,
                    d_ff=overrides.get("d_ff", 4 * d_model), vocab_size=tgt_vocab,
                    batch_size=batch_size, seq_len=seq_len,
                    bytes_per_value=4 if args.precision == "fp32" else 2)
                measured = None
            else:
                config = ModelConfig.preset(args.preset, src_vocab_size=src_vocab,
                                            tgt_vocab_size=tgt_vocab, **overrides)
                batch_size = args.batch_size
                if args.max_tokens:
                    batch_size = memory.batch_for_tokens(
                        args.max_tokens, src_len=args.src_len, tgt_len=args.tgt_len,
                        encoder_only=args.encoder_only)
                shape = dict(batch_size=batch_size, src_len=args.src_len, tgt_len=args.tgt_len,
                             precision=args.precision, device=device,
                             encoder_only=args.encoder_only, num_labels=args.num_labels,
                             pooling=args.pooling, label_smoothing=args.label_smoothing)
                estimate = memory.estimate_training_memory(config, **shape)
                measured = None
                if args.measure:
                    log.info("measuring two training steps on %s ...", device)
                    measured = memory.measure_training_peak(config, **shape)
        except ValueError as err:  # a bad flag value or combination
            raise InputError(str(err)) from None
        if args.json:
            out = estimate.to_dict()
            if measured is not None:
                out["measured"] = measured.to_dict()
                out["ratio"] = estimate.peak_bytes / max(measured.peak_bytes, 1)
            emit_json(out)
        else:
            print(memory.format_report(estimate, measured))
        return 0

    p.set_defaults(handler=run)


def _add_attention(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "attention",
        help="draw the attention maps of one sentence",
        description="Translate SENTENCE greedily (or classify it) and draw its attention weights "
        "with the tokens as axis labels: a grid of layers x heads for --kind encoder, decoder or "
        "cross (encoder-decoder), or the head-averaged source-target alignment of one layer. For "
        "a translation model the alignment is also written beside the grid (OUT-alignment.png).",
    )
    p.add_argument("sentence", help="the sentence (quote it)")
    p.add_argument("--model", required=True, metavar="RUN_DIR", help="model directory")
    p.add_argument("--kind", choices=("encoder", "decoder", "cross", "alignment"),
                   help="which attention (default: cross for translation, encoder for a classifier)")
    p.add_argument("--layer", type=int, help="decoder layer of the alignment, from 1 (default last)")
    p.add_argument("--max-len", type=int, help="longest translation in tokens (default: model's)")
    p.add_argument("--out", help="picture file, .png/.svg/.pdf (default attention-KIND.png)")
    p.add_argument("--svg", action="store_true", help="also write an SVG beside the picture")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        if not args.sentence.strip():
            raise InputError("the sentence is empty")
        if args.max_len is not None and args.max_len < 1:
            raise InputError(f"--max-len must be positive, got {args.max_len}")

        from transformer.model_dir import load_model_dir
        from transformer.visualization.figures import save_figure
        from transformer.visualization.sentence import draw_attention, sentence_attention

        loaded = load_model_dir(args.model, device=_device(args.device))
        att = sentence_attention(loaded, args.sentence, max_len=args.max_len)
        classifier = att.task == "classification"
        kind = args.kind or ("encoder" if classifier else "cross")
        out = Path(args.out or f"attention-{kind}.png")
        figures = [(out, draw_attention(att, kind, layer=args.layer))]
        if not classifier and kind != "alignment":
            figures.append((out.with_name(f"{out.stem}-alignment{out.suffix}"),
                            draw_attention(att, "alignment", layer=args.layer)))
        files = [str(f) for path, fig in figures for f in save_figure(fig, path, svg=args.svg)]
        if args.json:
            emit_json({"sentence": args.sentence, "task": att.task, "kind": kind,
                       "output": att.output, "source_tokens": att.src_tokens,
                       "target_tokens": att.tgt_out_tokens, "files": files})
        else:
            print(f"{'label' if classifier else 'translation'}: {att.output}")
            for f in files:
                print(f"wrote {f}")
        return 0

    p.set_defaults(handler=run)


def _add_plot(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="draw the positional encoding or a run's training curves")
    kinds = p.add_subparsers(dest="plot", metavar="WHAT", required=True)
    pos = kinds.add_parser("positional", help="the sinusoidal positional encoding as a heat map")
    pos.add_argument("--d-model", type=int, default=128, help="dimensions (default 128)")
    pos.add_argument("--max-len", type=int, default=64, help="positions (default 64)")
    curves = kinds.add_parser("curves", help="loss, learning rate and BLEU from metrics.jsonl")
    curves.add_argument("run_dir", metavar="RUN_DIR", nargs="+",
                        help="model directory (or a metrics file); several are drawn together")
    curves.add_argument("--x", choices=("step", "minutes"), default="step",
                        help="horizontal axis: update step (default) or minutes of training")
    for q, default in ((pos, "positional.png"), (curves, "curves.png")):
        q.add_argument("--out", default=default, help=f"picture file (default {default})")
        q.add_argument("--svg", action="store_true", help="also write an SVG beside the picture")
        q.add_argument("--json", action="store_true", help="print one JSON object")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from transformer.visualization.figures import save_figure

        if args.plot == "positional":
            for flag, value in (("--d-model", args.d_model), ("--max-len", args.max_len)):
                if value < 1 or value > 100_000:
                    raise InputError(f"{flag} must be between 1 and 100000, got {value}")
            from transformer.model import sinusoidal_table
            from transformer.visualization.positional import plot_positional_encoding

            fig = plot_positional_encoding(sinusoidal_table(args.max_len, args.d_model))
        else:
            from transformer.visualization.curves import plot_training_curves, read_metrics

            runs = {}
            for name in args.run_dir:
                source = Path(name)
                if not source.exists():
                    raise InputError(f"{source}: no such model directory")
                path = source / "metrics.jsonl" if source.is_dir() else source
                runs[name] = read_metrics(path)
                if not runs[name]:
                    raise InputError(f"{path}: no metrics recorded yet")
            title = args.run_dir[0] if len(runs) == 1 else ""
            short = {name: Path(name).name or name for name in runs}
            if len(set(short.values())) == len(runs):  # label by folder name when unambiguous
                runs = {short[name]: records for name, records in runs.items()}
                args.run_dir = [short[name] for name in args.run_dir]
            fig = plot_training_curves(runs if len(runs) > 1 else runs[args.run_dir[0]],
                                       x=args.x, title=title)
        files = [str(f) for f in save_figure(fig, args.out, svg=args.svg)]
        if args.json:
            emit_json({"plot": args.plot, "files": files})
        else:
            for f in files:
                print(f"wrote {f}")
        return 0

    p.set_defaults(handler=run)


def _column(value: str) -> str | int:
    """A column given by header name, or by 0-based index when it is all digits."""
    return int(value) if value.isdigit() else value


# ``transformer classify train`` flags that override a ClassifierTrainConfig field: flag, field, type
_CLASSIFY_OVERRIDES: tuple[tuple[str, str, Callable[[str], Any], str], ...] = (
    ("--vocab-size", "vocab_size", int, "subword vocabulary size"),
    ("--tokenizer", "tokenizer_type", str, "SentencePiece model type: bpe or unigram"),
    ("--character-coverage", "character_coverage", float, "SentencePiece character coverage"),
    ("--d-model", "d_model", int, "model width"),
    ("--heads", "num_heads", int, "attention heads"),
    ("--layers", "num_layers", int, "encoder layers"),
    ("--d-ff", "d_ff", int, "feed-forward width"),
    ("--dropout", "dropout", float, "dropout"),
    ("--max-len", "max_len", int, "model positions; longer texts are truncated (and counted)"),
    ("--pooling", "pooling", str, "mean or cls"),
    ("--lr", "lr", float, "peak learning rate"),
    ("--warmup", "warmup", int, "warmup updates"),
    ("--schedule", "schedule", str, "learning-rate decay after warmup: inverse_sqrt or linear"),
    ("--weight-decay", "weight_decay", float, "AdamW weight decay (0: Adam)"),
    ("--batch-tokens", "batch_tokens", int, "padded positions per batch"),
    ("--epochs", "epochs", int, "epochs"),
    ("--max-steps", "max_steps", int, "optimizer updates"),
    ("--minutes", "minutes", float, "wall-clock budget of the training loop"),
    ("--eval-every", "eval_every", int, "updates between validations"),
    ("--patience", "patience", int, "validations without improvement before stopping"),
    ("--label-smoothing", "label_smoothing", float, "single-label cross-entropy smoothing"),
    ("--pos-weight", "pos_weight", str, "multi-label positive weights: none or sqrt"),
    ("--seed", "seed", int, "random seed"),
)


def _device(name: str) -> Any:
    """``--device`` as a torch.device (``auto``: CUDA when available); bad names are bad input."""
    from transformer.training.distributed import resolve_device

    try:
        return resolve_device(name)
    except ValueError as err:
        raise InputError(f"--device {name!r}: {err}") from None


def _set_threads(threads: int | None) -> None:
    if threads is not None:
        if threads < 1:
            raise InputError(f"--threads must be at least 1, got {threads}")
        import torch

        torch.set_num_threads(threads)


def _classify_train(args: argparse.Namespace) -> int:
    import shutil
    from pathlib import Path

    from transformer.data.classification_splits import DEFAULT_SEED, resolve_splits
    from transformer.training.train_classifier import (
        CLASSIFIER_PRESETS,
        ClassifierTrainConfig,
        train_classifier,
    )

    _set_threads(args.threads)
    if args.preset is not None and args.preset not in CLASSIFIER_PRESETS:
        raise InputError(f"unknown preset {args.preset!r}; choose from {', '.join(CLASSIFIER_PRESETS)}")
    data = args.data
    if data is None and args.train is None and args.preset is not None:
        data = CLASSIFIER_PRESETS[args.preset]["data"]
    if data is None and args.train is None:
        raise InputError("give --data NAME, --train FILE, or a dataset preset (--preset nsmc-cpu)")
    preset = args.preset or (f"{data}-cpu" if data is not None else None)
    overrides = {field: getattr(args, field) for _, field, _, _ in _CLASSIFY_OVERRIDES
                 if getattr(args, field) is not None}
    try:
        config = (ClassifierTrainConfig.preset(preset, **overrides) if preset is not None
                  else ClassifierTrainConfig(**overrides))
    except ValueError as err:
        raise InputError(str(err)) from None
    run_dir = Path(args.out)
    if (run_dir / "config.json").exists():
        if not args.overwrite:
            raise InputError(f"{run_dir} already holds a model; pass --overwrite to replace it")
        for name in ("metrics.jsonl", "results.json"):
            (run_dir / name).unlink(missing_ok=True)
        shutil.rmtree(run_dir / "checkpoint", ignore_errors=True)
    splits, recipe, info = resolve_splits(
        data=data, train=args.train, valid=args.valid, test=args.test,
        text_column=args.text_column, label_column=args.label_column, format=args.format,
        label_separator=args.label_separator,
        seed=args.split_seed if args.split_seed is not None else DEFAULT_SEED,
    )
    summary = train_classifier(splits, config=config, run_dir=run_dir, multi_label=args.multi_label,
                               recipe=recipe, data_info={**info, "preset": preset},
                               device=args.device, progress=args.progress)
    if args.json:
        emit_json(summary)
        return 0
    print(f"model written to {run_dir} ({summary['parameters']:,} parameters, "
          f"{summary['steps']} updates, {summary['epochs']} epochs, {summary['train_s']:.0f}s training)")
    for name, figures in summary["splits"].items():
        print(f"{name:>6}: accuracy {figures['accuracy']:.4f}  micro-F1 {figures['micro_f1']:.4f}  "
              f"macro-F1 {figures['macro_f1']:.4f}  ({figures['num_examples']} texts)")
    return 0


def _read_texts(args: argparse.Namespace) -> list[str]:
    """Texts from the command line, a file (one a line) or stdin."""
    if args.text:
        if args.file is not None:
            raise InputError("give texts on the command line or --file, not both")
        return list(args.text)
    if args.file is not None:
        from transformer.data.text_files import iter_file_lines

        return [text for _, text in iter_file_lines(args.file)]
    data = sys.stdin.read()
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _classify_predict(args: argparse.Namespace) -> int:
    _set_threads(args.threads)
    from transformer.evaluation.classifier import Classifier

    classifier = Classifier.load(args.model, device=args.device)
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
        chosen = out.labels(i)
        print(", ".join(f"{name} {p:.3f}" for name, p in chosen) if chosen else "(none)")
    return 0


def _classify_evaluate(args: argparse.Namespace) -> int:
    _set_threads(args.threads)
    from transformer.evaluation.classifier import Classifier, evaluation_data

    classifier = Classifier.load(args.model, device=args.device)
    data = evaluation_data(classifier, data=args.data, split=args.split, file=args.file,
                           text_column=args.text_column, label_column=args.label_column,
                           format=args.format, label_separator=args.label_separator)
    result = classifier.evaluate(data)
    if args.json:
        emit_json({"model": str(args.model), **result.to_dict()})
    else:
        print(result.format())
    return 0


def _add_classify(sub: argparse._SubParsersAction) -> None:
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

    def file_columns(q: argparse._ArgumentGroup, *, default: bool) -> None:
        q.add_argument("--text-column", type=_column, default="text" if default else None,
                       help="text column: header name, or 0-based index" + (" (default text)" if default else
                                                                           " (default: as in training)"))
        q.add_argument("--label-column", type=_column, default="label" if default else None,
                       help="label column: name or index" + (" (default label)" if default else
                                                             " (default: as in training)"))
        q.add_argument("--format", choices=("tsv", "csv", "jsonl"), help="file format (default: from the name)")
        q.add_argument("--label-separator", default="," if default else None,
                       help="between several labels in one cell (default ,)")

    t = verbs.add_parser(
        "train", help="train a classifier",
        description="Train a classifier and write its model directory (config.json with labels "
        "and thresholds, model.safetensors, tokenizer/, metrics.jsonl, results.json). --data nsmc "
        "holds out a validation and a test split of the training file; --data goemotions holds out "
        "a validation split of train (for model selection and thresholds) and reports dev. Presets: "
        "tiny, nsmc-cpu, goemotions-cpu (each 30 minutes on a 2-core CPU); flags override them.",
    )
    src = t.add_argument_group("data")
    src.add_argument("--data", type=str.lower, choices=("nsmc", "goemotions"), help="a corpus by name")
    src.add_argument("--train", metavar="FILE", help="training file (TSV, CSV or JSONL; .gz allowed)")
    src.add_argument("--valid", metavar="FILE", help="validation file (default: hold out 10%% of --train)")
    src.add_argument("--test", metavar="FILE", help="test file, reported at the end")
    file_columns(src, default=True)
    kind = src.add_mutually_exclusive_group()
    kind.add_argument("--multi-label", dest="multi_label", action="store_true", default=None,
                      help="several labels per text (default: detected from the training file)")
    kind.add_argument("--single-label", dest="multi_label", action="store_false")
    src.add_argument("--split-seed", type=int, help="seed of the held-out splits (default 1234)")
    t.add_argument("--out", required=True, metavar="RUN_DIR", help="model directory to write")
    t.add_argument("--overwrite", action="store_true", help="replace a model already in RUN_DIR")
    t.add_argument("--preset", metavar="NAME", help="tiny, nsmc-cpu or goemotions-cpu (default: "
                   "DATA-cpu for --data, else the built-in defaults)")
    hyper = t.add_argument_group("model and training (override the preset)")
    for flag, field, kind_of, what in _CLASSIFY_OVERRIDES:
        hyper.add_argument(flag, dest=field, type=kind_of, help=what)
    t.add_argument("--threads", type=int, help="torch CPU threads (default: all cores)")
    t.add_argument("--device", default="cpu", help="torch device (default cpu)")
    t.add_argument("--progress", action="store_true", help="show a progress bar")
    t.add_argument("--json", action="store_true", help="print one JSON object")
    t.set_defaults(handler=_classify_train)

    q = verbs.add_parser(
        "predict", help="predict labels with probabilities",
        description="Print the predicted labels of each text with their probabilities, one line "
        "per text: texts on the command line, in --file (one a line) or on stdin. Long texts are "
        "truncated to the model's limit and empty texts are predicted too; both are counted.",
    )
    q.add_argument("text", nargs="*", help="texts to classify (default: --file or stdin)")
    q.add_argument("--model", required=True, metavar="RUN_DIR", help="model directory")
    q.add_argument("--file", metavar="FILE", help="texts, one a line (plain or .gz)")
    q.add_argument("--threads", type=int, help="torch CPU threads")
    q.add_argument("--device", default="cpu", help="torch device (default cpu)")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.set_defaults(handler=_classify_predict)

    e = verbs.add_parser(
        "evaluate", help="accuracy, micro/macro F1 and a per-label table",
        description="Score a classifier on a labelled file (--file) or a corpus split (--data NAME "
        "--split SPLIT; the held-out splits are redrawn exactly as in training): accuracy (exact "
        "match for multi-label), micro and macro F1 and per-label precision, recall and F1.",
    )
    e.add_argument("--model", required=True, metavar="RUN_DIR", help="model directory")
    e.add_argument("--file", metavar="FILE", help="labelled file (TSV, CSV or JSONL)")
    e.add_argument("--data", type=str.lower, choices=("nsmc", "goemotions"), help="a corpus by name")
    e.add_argument("--split", default="test",
                   help="corpus split: train, valid, test (default), or dev for goemotions")
    file_columns(e.add_argument_group("file columns"), default=False)
    e.add_argument("--threads", type=int, help="torch CPU threads")
    e.add_argument("--device", default="cpu", help="torch device (default cpu)")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.set_defaults(handler=_classify_evaluate)


# --- train and demo (translation) -------------------------------------------------------------

# flag, field of ModelConfig, type, help: all default to the preset's value
_MODEL_FLAGS = (
    ("--d-model", "d_model", int, "model width (d_model)"),
    ("--num-heads", "num_heads", int, "attention heads (h)"),
    ("--encoder-layers", "num_encoder_layers", int, "encoder layers (N)"),
    ("--decoder-layers", "num_decoder_layers", int, "decoder layers (N)"),
    ("--d-ff", "d_ff", int, "feed-forward inner width (d_ff)"),
    ("--dropout", "dropout", float, "dropout on sub-layer outputs and embeddings (P_drop)"),
    ("--attention-dropout", "attention_dropout", float, "dropout on attention weights (paper: 0)"),
    ("--activation-dropout", "activation_dropout", float, "dropout inside the feed-forward network"),
    ("--max-len", "max_len", int, "longest sequence in tokens (longer pairs: --on-long)"),
    ("--activation", "activation", str, "relu (paper) or gelu"),
    ("--positional", "positional", str, "sinusoidal (paper) or learned"),
)
# flag, field of TranslationTrainConfig, type, help: None means the configuration's default
_TRAIN_FLAGS = (
    ("--vocab-size", "vocab_size", int, "SentencePiece vocabulary size (default 8000)"),
    ("--model-type", "model_type", str, "tokenizer: bpe (default), unigram, char or word"),
    ("--max-tokens", "max_tokens", int, "tokens per micro-batch and process, padding included (default 4096)"),
    ("--accumulate", "accumulate", int, "micro-batches per optimizer update (default 1)"),
    ("--schedule", "schedule", str, "noam (the paper's equation 3; default for base/big), "
     "inverse_sqrt (peak --lr; default for tiny/small) or constant"),
    ("--warmup", "warmup", int, "warmup updates (default: 4000 for base/big, 400 for tiny/small)"),
    ("--lr-scale", "lr_scale", float, "noam: factor on equation 3 (default 1)"),
    ("--lr", "lr", float, "inverse_sqrt/constant: the peak learning rate (default 1e-3)"),
    ("--cooldown", "cooldown", int, "lower the rate linearly towards 0 over the last N updates "
     "before --max-steps (default 0: no cool-down)"),
    ("--adam-eps", "adam_eps", float, "Adam epsilon (default 1e-9)"),
    ("--weight-decay", "weight_decay", float, "decoupled weight decay, AdamW (default 0, as the paper)"),
    ("--label-smoothing", "label_smoothing", float, "epsilon_ls (default 0.1)"),
    ("--clip-norm", "clip_norm", float, "gradient-norm clipping, 0 turns it off (default 1)"),
    ("--precision", "precision", str, "fp32 (default), bf16 (CPU or GPU) or fp16 (GPU, grad scaler)"),
    ("--eval-every", "eval_every", int, "updates between validations and checkpoints (default 500)"),
    ("--log-every", "log_every", int, "updates between log lines (default 50)"),
    ("--bleu-sample", "bleu_sample", int, "validation sentences translated for BLEU (default 500)"),
    ("--average-last", "average_last", int, "keep the weights of the last N validations "
     "(RUN_DIR/snapshots/); at the end their average replaces the model if it validates better"),
    ("--metric", "metric", str, "selects the best model: bleu (default), chrf or exact_match"),
    ("--on-long", "on_long", str, "pairs longer than --max-len: truncate (default) or filter"),
)
_STOP_FLAGS = (
    ("--epochs", "epochs", int, "stop after this many epochs"),
    ("--max-steps", "max_steps", int, "stop after this many optimizer updates"),
    ("--minutes", "minutes", float, "stop after this much wall-clock time (the whole run)"),
    ("--patience", "patience", int, "stop after this many validations without improvement"),
)


def _progress(args: argparse.Namespace) -> bool:
    return args.progress if args.progress is not None else sys.stderr.isatty()


def _train(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from transformer.training import distributed
    from transformer.training.translation import (
        STOP_FIELDS,
        TranslationTrainConfig,
        resume_translation,
        train_translation,
    )

    _set_threads(args.threads)
    main_rank = int(os.environ.get("RANK", "0")) == 0  # under torchrun only rank 0 reports
    if not main_rank:
        logging.getLogger().setLevel(logging.WARNING)
    stop = {field: getattr(args, field) for _, field, _, _ in _STOP_FLAGS}
    try:
        if args.resume is not None:
            given = [flag for flag, field, _, _ in (*_MODEL_FLAGS, *_TRAIN_FLAGS)
                     if getattr(args, field) is not None]
            given += [f"--{name}" for name in ("data", "train_src", "valid_src", "preset", "out")
                      if getattr(args, name) is not None]
            if given:
                raise InputError(
                    f"--resume continues with the stored configuration; {given[0]} cannot change "
                    f"(only {', '.join('--' + f.replace('_', '-') for f in STOP_FIELDS)} can)"
                )
            summary = resume_translation(args.resume, device=args.device,
                                         progress=_progress(args), **stop)
        else:
            run_dir = Path(args.out or "runs/train")
            if (run_dir / "config.json").exists() and not args.overwrite:
                raise InputError(f"{run_dir} already holds a model; pass --overwrite to replace "
                                 f"it or --resume {run_dir} to continue it")
            if args.overwrite:
                import shutil

                for name in ("checkpoint", "snapshots", "metrics.jsonl"):
                    path = run_dir / name
                    shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
            recipe = RECIPES.get(args.preset or "", {})
            preset = recipe.get("preset", args.preset or "small")
            model = dict(recipe.get("model", {}))
            model.update({field: getattr(args, field) for _, field, _, _ in _MODEL_FLAGS
                          if getattr(args, field) is not None})
            for flag in ("norm_first", "share_embeddings", "tie_embeddings"):
                if getattr(args, flag):
                    model[flag] = True
            if args.layers is not None:  # --encoder-layers/--decoder-layers win over --layers
                for field in ("num_encoder_layers", "num_decoder_layers"):
                    if getattr(args, field) is None:
                        model[field] = args.layers
            options = dict(recipe.get("training", {}))
            options.update({field: getattr(args, field) for _, field, _, _ in _TRAIN_FLAGS
                            if getattr(args, field) is not None})
            if recipe and all(v is None for k, v in stop.items() if k != "patience"):
                stop.update(recipe["stop"])  # a stop flag replaces the recipe's whole budget
            elif recipe.get("training", {}).get("cooldown") and args.cooldown is None:
                # keep the recipe's cool-down as the same share of the new --max-steps (none
                # without one)
                share = recipe["training"]["cooldown"] / recipe["stop"]["max_steps"]
                options["cooldown"] = round(share * stop["max_steps"]) if stop["max_steps"] else 0
            # base and big: the paper's schedule; tiny and small are for short CPU runs of a few
            # hundred to a few thousand updates, where 4000 warmup updates would never end
            paper = preset in ("base", "big")
            options.setdefault("schedule", "noam" if paper else "inverse_sqrt")
            options.setdefault("warmup", 4000 if paper else 400)
            if options.get("clip_norm") == 0:
                options["clip_norm"] = None
            if all(v is None for k, v in stop.items() if k != "patience"):
                stop["epochs"] = 10
            explicit = args.train_src is not None or args.train_tgt is not None
            config = TranslationTrainConfig(
                data=None if explicit else (args.data or "multi30k"),
                src_lang=args.src, tgt_lang=args.tgt,
                train_src=args.train_src, train_tgt=args.train_tgt,
                valid_src=args.valid_src, valid_tgt=args.valid_tgt,
                joint=args.joint, byte_fallback=not args.no_byte_fallback,
                preset=preset, model=model, seed=args.seed,
                adam_betas=tuple(args.adam_betas) if args.adam_betas else (0.9, 0.98),
                **options, **{k: v for k, v in stop.items() if v is not None},
            )
            summary = train_translation(config, run_dir=run_dir, device=args.device,
                                        progress=_progress(args))
    except ValueError as err:
        if isinstance(err, InputError):
            raise
        raise InputError(str(err).splitlines()[0]) from None
    finally:
        distributed.shutdown()
    if main_rank:
        if args.json:
            emit_json(summary)
        else:
            best = summary["best_metric"]
            figure = f"best validation {summary['metric']} {best:.4g} at update " \
                     f"{summary['best_step']}" if best is not None else "no validation data"
            print(f"model written to {summary['run_dir']} ({summary['parameters']:,} parameters, "
                  f"{summary['steps']} updates, {summary['epochs']:.2f} epochs, "
                  f"{summary['train_s']:.0f}s, stopped by {summary['stopped_by']}); {figure}")
    return 0


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a translation model (Multi30k by name, or any parallel text files)",
        description="Train an encoder-decoder Transformer. Data: --data multi30k --src en --tgt de, "
        "or --train-src/--train-tgt (and --valid-src/--valid-tgt) files. The run directory gets "
        "config.json, model.safetensors (best by validation), tokenizer/, checkpoint/ and "
        "metrics.jsonl; --resume RUN_DIR continues exactly. Under torchrun every process trains "
        "on its shard (torchrun --nproc-per-node 2 -m transformer train ...).",
    )
    data = p.add_argument_group("data")
    data.add_argument("--data", choices=("multi30k", "numbers"), help="a corpus by name (default multi30k)")
    data.add_argument("--src", default="en", help="source language of --data (default en)")
    data.add_argument("--tgt", default="de", help="target language of --data (default de)")
    for name in ("train-src", "train-tgt", "valid-src", "valid-tgt"):
        data.add_argument(f"--{name}", metavar="FILE", help="parallel text, one sentence a line (.gz ok)")
    tok = p.add_argument_group("tokenizer")
    tok.add_argument("--joint", dest="joint", action="store_true", default=True,
                     help="one vocabulary for both languages (default)")
    tok.add_argument("--separate", dest="joint", action="store_false", help="one vocabulary per language")
    tok.add_argument("--no-byte-fallback", action="store_true",
                     help="unknown characters become <unk> instead of UTF-8 byte pieces")
    model = p.add_argument_group("model (defaults: the preset's)")
    model.add_argument("--preset", choices=("tiny", "small", "base", "big", *RECIPES),
                       help="model shape (default small; base and big are the paper's Table 3), "
                       "or a whole recipe: multi30k-cpu is the README's one-hour CPU result "
                       "(shape, optimisation and a 60-minute budget; any flag overrides it)")
    model.add_argument("--layers", type=int, help="encoder and decoder layers at once")
    for flag, field, kind, text in _MODEL_FLAGS:
        model.add_argument(flag, dest=field, type=kind, help=text)
    model.add_argument("--norm-first", action="store_true", help="pre-LN instead of the paper's post-LN")
    model.add_argument("--share-embeddings", action="store_true",
                       help="one embedding table for both languages (needs --joint)")
    model.add_argument("--tie-embeddings", action="store_true",
                       help="output projection = target embedding (section 3.4)")
    train = p.add_argument_group("training")
    for flag, field, kind, text in (*_TRAIN_FLAGS, *_STOP_FLAGS):
        train.add_argument(flag, dest=field, type=kind, help=text)
    train.add_argument("--adam-betas", type=float, nargs=2, metavar=("B1", "B2"),
                       help="Adam betas (default 0.9 0.98)")
    train.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    run = p.add_argument_group("run")
    run.add_argument("--out", metavar="RUN_DIR", help="run directory (default runs/train)")
    run.add_argument("--resume", metavar="RUN_DIR", help="continue this run exactly")
    run.add_argument("--overwrite", action="store_true", help="replace a model already in --out")
    run.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    run.add_argument("--threads", type=int, help="CPU threads for PyTorch")
    run.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="progress bar (default: when stderr is a terminal)")
    run.add_argument("--json", action="store_true", help="print one JSON summary")
    p.set_defaults(handler=_train)


def _demo(args: argparse.Namespace) -> int:
    from transformer.training.demo import run_demo

    # One thread by default: the model is so small that a second one gains little, and loses a
    # lot when the CPU is shared with other work.
    _set_threads(args.threads if args.threads is not None else 1)
    if args.minutes is not None and args.minutes <= 0:
        raise InputError(f"--minutes must be positive, got {args.minutes}")
    if args.max_steps is not None and args.max_steps < 1:
        raise InputError(f"--max-steps must be at least 1, got {args.max_steps}")
    try:
        summary = run_demo(run_dir=args.out, seed=args.seed, minutes=args.minutes,
                           max_steps=args.max_steps, device=args.device, progress=_progress(args))
    except ValueError as err:  # e.g. --device cuda without CUDA
        if isinstance(err, InputError):
            raise
        raise InputError(str(err).splitlines()[0]) from None
    if args.json:
        emit_json(summary)
        return 0
    test = summary["test"]
    print(f"Trained a {summary['parameters']:,}-parameter Transformer on English -> German number "
          f"words: {summary['steps']} updates in {summary['train_s']:.0f}s ({summary['device']}).")
    print()
    width = max(len(e["source"]) for e in summary["examples"])
    for e in summary["examples"]:
        mark = "ok" if e["correct"] else f"expected {e['reference']}"
        print(f"  {e['source']:<{width}}  ->  {e['translation']}   [{mark}]")
    print()
    # BLEU is left out: a German number is one word, so there are no 4-grams to match
    print(f"Test split: exact match {test['exact_match']:.1%} of {test['num_examples']} numbers "
          f"(chrF {test['chrf']:.1f}).")
    print(f"Attention map of \"{summary['attention']['source']}\": {summary['attention']['path']}")
    print(f"Run directory: {summary['run_dir']} (try: transformer translate --model "
          f"{summary['run_dir']})  [{summary['total_s']:.0f}s in all]")
    return 0


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="train on the built-in number-words task, show translations and attention",
        description="The whole job in a few minutes on a CPU: trains a small Transformer to turn "
        "English number words into German ones, prints test translations beside their references "
        "and the exact-match accuracy, and draws the cross-attention of one example.",
    )
    p.add_argument("--out", default="runs/demo", metavar="RUN_DIR", help="run directory (default runs/demo)")
    p.add_argument("--minutes", type=float, default=3.5, help="training time budget (default 3.5)")
    p.add_argument("--max-steps", type=int, default=1000, help="optimizer updates (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="random seed of data and training (default 0)")
    p.add_argument("--device", default="auto", help="auto (default), cpu or cuda")
    p.add_argument("--threads", type=int, help="CPU threads for PyTorch (default 1)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: when stderr is a terminal)")
    p.add_argument("--json", action="store_true", help="print one JSON summary")
    p.set_defaults(handler=_demo)


def _decode_flags(p: argparse.ArgumentParser) -> None:
    """Decoding flags shared by ``translate`` and ``evaluate``."""
    g = p.add_argument_group("decoding")
    g.add_argument("--beam", type=int, default=4,
                   help="beam size; 1 is greedy decoding (default 4, as the paper)")
    g.add_argument("--length-penalty", type=float, default=0.6,
                   help="GNMT length penalty alpha of beam search (default 0.6, as the paper)")
    g.add_argument("--max-len-a", type=float,
                   help="a translation has at most a * source tokens + b tokens "
                   "(default: the run's training setting, else 1.5)")
    g.add_argument("--max-len-b", type=int, help="see --max-len-a (default: the run's, else 10)")
    g.add_argument("--max-len", type=int, help="absolute cap in tokens (default: model positions)")
    g.add_argument("--batch-size", type=int, default=64, help="sentences decoded at once (default 64)")
    g.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="weights and activations while decoding: fp32 (default) or bf16, faster "
                   "on CPUs with bf16 matmuls (beam scores stay float32)")
    g.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    g.add_argument("--threads", type=int, help="CPU threads for PyTorch")


def _load_translator(args: argparse.Namespace, *, nbest: int | None = None) -> Any:
    """``--model`` and the decoding flags -> (Translator, LoadedModel); InputError if bad."""

    from transformer.decoding.translator import DecodeOptions, Translator
    from transformer.model_dir import load_model_dir

    _set_threads(args.threads)
    if args.batch_size < 1:
        raise InputError(f"--batch-size must be positive, got {args.batch_size}")
    device = _device(args.device)
    loaded = load_model_dir(args.model, device=device)
    if loaded.tgt_tokenizer is None:
        raise InputError(f"{args.model} holds a classifier; use transformer classify predict")
    if args.precision == "bf16":
        import torch

        loaded.model.to(torch.bfloat16)
    training = loaded.config.get("training", {})
    try:
        options = DecodeOptions(
            beam_size=args.beam, length_penalty=args.length_penalty, nbest=nbest,
            max_len_a=args.max_len_a if args.max_len_a is not None
            else training.get("decode_max_len_a", 1.5),
            max_len_b=args.max_len_b if args.max_len_b is not None
            else training.get("decode_max_len_b", 10),
            max_len=args.max_len,
        )
    except ValueError as err:
        raise InputError(str(err)) from None
    return Translator.from_loaded(loaded, options=options, batch_size=args.batch_size), loaded


def _stdin_lines() -> Any:
    """Lines of standard input as text (without line endings), decoded as UTF-8 line by line."""
    for number, raw in enumerate(sys.stdin.buffer, start=1):
        try:
            yield raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as err:
            raise InputError(f"<stdin>, line {number}: not valid UTF-8 ({err.reason})") from None


def _translate(args: argparse.Namespace) -> int:
    from transformer.decoding.translator import Translation

    if args.nbest is not None and not 1 <= args.nbest <= args.beam:
        raise InputError(f"--nbest must be between 1 and --beam {args.beam}, got {args.nbest}")
    translator, _ = _load_translator(args, nbest=args.nbest)

    def lines_of(t: Translation, number: int) -> list[str]:
        if args.json:
            item = {"line": number, "translation": t.text, "score": t.score}
            if args.nbest:
                item["nbest"] = [{"translation": s, "score": v} for s, v in t.nbest]
            return [json.dumps(item, ensure_ascii=False, sort_keys=True)]
        if args.nbest:  # always exactly --nbest lines per input: LINE <tab> SCORE <tab> TEXT
            pairs = t.nbest or [("", 0.0)]
            pairs = pairs + [pairs[-1]] * (args.nbest - len(pairs))
            return [f"{number}\t{score:.4f}\t{text}" for text, score in pairs]
        return [t.text]

    if args.input is not None:
        from transformer.data.parallel import read_lines

        sources: Any = read_lines(args.input)
        results: Any = translator.translate(sources)
    elif sys.stdin.isatty() and args.output is None:  # interactive prompt
        print("Type a sentence and press Enter (Ctrl-D to quit).", file=sys.stderr)

        def prompt() -> Any:
            while True:
                try:
                    yield input("> ")
                except EOFError:
                    print(file=sys.stderr)
                    return

        results = translator.stream(prompt(), chunk_size=1)
    else:
        results = translator.stream(_stdin_lines())

    if args.output is not None:  # whole output first, then one atomic write
        from transformer.data.text_files import atomic_write_bytes

        out = [line for n, t in enumerate(results, start=1) for line in lines_of(t, n)]
        atomic_write_bytes(args.output, "".join(f"{line}\n" for line in out).encode("utf-8"))
        log.info("wrote %d lines to %s", len(out), args.output)
    else:
        for n, t in enumerate(results, start=1):
            sys.stdout.write("".join(f"{line}\n" for line in lines_of(t, n)))
            sys.stdout.flush()
    if translator.truncated:
        log.warning("%d source sentences were longer than the model's %d positions and were cut",
                    translator.truncated, translator.model.config.max_len)
    return 0


def _add_translate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "translate",
        help="translate lines from stdin, a file, or an interactive prompt",
        description="Translate one sentence per line with a model directory. Reads standard input "
        "(or -i FILE) and writes one translation per input line, in input order (empty input line: "
        "empty output line); with a terminal on standard input, an interactive prompt. With "
        "--nbest K, each input gives K lines 'LINE<tab>SCORE<tab>TRANSLATION'; with --json, one "
        "JSON object per input line.",
    )
    p.add_argument("--model", required=True, metavar="RUN_DIR", help="model directory")
    p.add_argument("-i", "--input", metavar="FILE", help="read sentences from FILE (.gz ok)")
    p.add_argument("-o", "--output", metavar="FILE", help="write translations to FILE (atomically)")
    p.add_argument("--nbest", type=int, help="print the K best translations of each sentence")
    p.add_argument("--json", action="store_true", help="one JSON object per input line")
    _decode_flags(p)
    p.set_defaults(handler=_translate)


def _evaluate(args: argparse.Namespace) -> int:
    from transformer.data.parallel import read_lines
    from transformer.evaluation.bleu import score_translations

    if (args.src_file is None) != (args.ref_file is None):
        raise InputError("give both --src-file and --ref-file, or neither")
    translator, loaded = _load_translator(args)
    training = loaded.config.get("training", {})
    if args.src_file is not None:
        sources, references = read_lines(args.src_file), read_lines(args.ref_file)
        if len(sources) != len(references):
            raise InputError(f"{args.src_file} has {len(sources)} lines but {args.ref_file} has "
                             f"{len(references)}; line i of one must translate line i of the other")
        name = f"{args.src_file} -> {args.ref_file}"
    else:
        data = args.data or training.get("data") or "multi30k"
        if data == "numbers":
            from transformer.data.builtin_task import number_task_splits

            splits = number_task_splits(training.get("seed", 0))
            split = args.split or "test"
            if split not in splits:
                raise InputError(f"unknown numbers split {split!r}: expected one of {', '.join(splits)}")
            corpus = splits[split]
        elif data == "multi30k":
            from transformer.data.corpora import load_corpus

            corpus = load_corpus("multi30k", args.split or "test_2016_flickr",
                                 args.src or training.get("src_lang", "en"),
                                 args.tgt or training.get("tgt_lang", "de"))
        else:
            raise InputError(f"unknown corpus {data!r}: use --data multi30k or numbers, or "
                             "--src-file/--ref-file")
        sources, references, name = corpus.src, corpus.tgt, corpus.name
    hypotheses = [t.text for t in translator.translate(sources)]
    if args.hyp_out is not None:
        from transformer.data.text_files import atomic_write_bytes

        atomic_write_bytes(args.hyp_out, "".join(f"{h}\n" for h in hypotheses).encode("utf-8"))
    scores = score_translations(hypotheses, references)
    opt = translator.options
    if args.json:
        emit_json({"model": str(args.model), "data": name, **scores.to_dict(),
                   "beam": opt.beam_size, "length_penalty": opt.length_penalty,
                   "max_len_a": opt.max_len_a, "max_len_b": opt.max_len_b,
                   "hyp_out": args.hyp_out})
    else:
        print(f"{name}: {scores.sentences} sentences, beam {opt.beam_size}")
        print(scores.summary())
    return 0


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate",
        help="score a model on a test split with sacreBLEU (BLEU, chrF)",
        description="Translate a test set and score it with sacreBLEU on detokenized text: BLEU and "
        "chrF with their signatures, plus BLEU on lowercased 13a-tokenized text. The test set is a "
        "split of a known corpus (--data multi30k --split test_2016_flickr, languages from the run) "
        "or any pair of files --src-file/--ref-file.",
    )
    p.add_argument("--model", required=True, metavar="RUN_DIR", help="model directory")
    p.add_argument("--data", choices=("multi30k", "numbers"),
                   help="a corpus by name (default: the one the run trained on)")
    p.add_argument("--split", help="split of --data (default test_2016_flickr; numbers: test)")
    p.add_argument("--src", help="source language (default: the run's)")
    p.add_argument("--tgt", help="target language (default: the run's)")
    p.add_argument("--src-file", metavar="FILE", help="source sentences, one a line (.gz ok)")
    p.add_argument("--ref-file", metavar="FILE", help="reference translations, line-aligned")
    p.add_argument("--hyp-out", metavar="FILE", help="write the translations to FILE")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    _decode_flags(p)
    p.set_defaults(handler=_evaluate)


def _average(args: argparse.Namespace) -> int:
    from pathlib import Path

    from transformer.training.average import average_model_dirs, average_snapshots

    out = Path(args.out)
    if (out / "config.json").exists() and not args.overwrite:
        raise InputError(f"{out} already holds a model; pass --overwrite to replace it")
    if args.last is not None:
        if len(args.models) != 1:
            raise InputError(f"--last averages the snapshots of one run, got {len(args.models)} "
                             "model directories")
        summary = average_snapshots(args.models[0], out, last=args.last)
        what = f"the last {args.last} snapshots (updates {', '.join(map(str, summary['steps']))})"
    else:
        summary = average_model_dirs(args.models, out)
        what = f"{len(summary['averaged_from'])} models ({summary['parameters']:,} parameters)"
    if args.json:
        emit_json(summary)
    else:
        print(f"averaged {what} into {summary['out']}")
    return 0


def _add_average(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "average",
        help="average the parameters of several model directories, or of a run's last snapshots",
        description="Checkpoint averaging (section 6.1 of the paper): every parameter of the new "
        "model is the mean over the given model directories, which must share configuration and "
        "tokenizers; or, with --last N and one run directory, over the weights that run kept of "
        "its last N evaluations (train --keep-last).",
    )
    p.add_argument("--models", nargs="+", required=True, metavar="RUN_DIR",
                   help="model directories to average (at least two), or one run with --last")
    p.add_argument("--last", type=int, metavar="N", help="average the run's newest N snapshots")
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="where to write the average")
    p.add_argument("--overwrite", action="store_true", help="replace a model already in --out")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=_average)


VERBS: list[Callable[[argparse._SubParsersAction], None]] = [_add_version, _add_memory, _add_attention, _add_plot, _add_classify, _add_train, _add_demo, _add_translate, _add_evaluate, _add_average]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="transformer",
        description='The Transformer of "Attention Is All You Need": train, translate, evaluate, '
        "classify and look inside.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for add in VERBS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    if not hasattr(args, "handler"):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.handler(args) or 0)
    except InputError as err:
        print(f"transformer: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("transformer: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
