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

        import torch

        from transformer.training.checkpoint import load_model_dir
        from transformer.visualization.figures import save_figure
        from transformer.visualization.sentence import draw_attention, sentence_attention

        try:
            device = torch.device(args.device)
        except RuntimeError:
            raise InputError(f"--device {args.device!r} is not a torch device") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise InputError(f"--device {args.device}: CUDA is not available")
        loaded = load_model_dir(args.model, device=device)
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
    curves.add_argument("run_dir", metavar="RUN_DIR", help="model directory (or a metrics file)")
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

            source = Path(args.run_dir)
            if not source.exists():
                raise InputError(f"{source}: no such model directory")
            path = source / "metrics.jsonl" if source.is_dir() else source
            records = read_metrics(path)
            if not records:
                raise InputError(f"{path}: no metrics recorded yet")
            fig = plot_training_curves(records, title=str(source))
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


VERBS: list[Callable[[argparse._SubParsersAction], None]] = [_add_version, _add_memory, _add_attention, _add_plot, _add_classify]


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
