"""What the verbs share: printing JSON, devices and threads, and every configuration flag,
declared once.

A configuration flag stores its value under ``set:KEY`` where KEY is the key of
``transformer.config.apply_overrides`` (``model.d_model``, ``lr``); :func:`overrides` collects the
flags that were given. Defaults live in the configuration: a flag left out is no override.
"""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import sys
from collections.abc import Callable, Iterable
from typing import Any

from transformer.config.choices import (
    ACTIVATIONS,
    INFERENCE_PRECISIONS,
    POSITIONAL,
    TRAINING_PRECISIONS,
)
from transformer.errors import InputError

KEY = "set:"

# flag, key, type (or an argparse action), help, old spellings kept as aliases for one release
Flag = tuple[str, str, Any, str, tuple[str, ...]]
_PRESET = "(default: the preset's, see `config show`)"

MODEL_FLAGS: tuple[Flag, ...] = (
    ("--d-model", "model.d_model", int, f"model width, d_model {_PRESET}", ()),
    ("--num-heads", "model.num_heads", int, f"attention heads, h {_PRESET}", ("--heads",)),
    ("--layers", "model.layers", int, "layers of every stack the model has: encoder and decoder "
     "(a classifier: its encoder); --encoder-layers/--decoder-layers win", ()),
    ("--encoder-layers", "model.num_encoder_layers", int, f"encoder layers, N {_PRESET}", ()),
    ("--decoder-layers", "model.num_decoder_layers", int, f"decoder layers, N {_PRESET}", ()),
    ("--d-ff", "model.d_ff", int, f"feed-forward inner width, d_ff {_PRESET}", ()),
    ("--dropout", "model.dropout", float, f"dropout on sub-layer outputs and embeddings {_PRESET}",
     ()),
    ("--attention-dropout", "model.attention_dropout", float,
     "dropout on attention weights (paper: 0)", ()),
    ("--activation-dropout", "model.activation_dropout", float,
     "dropout inside the feed-forward network (paper: 0)", ()),
    ("--max-len", "model.max_len", int, f"model positions: longest sequence in tokens {_PRESET}",
     ()),
    ("--activation", "model.activation", ACTIVATIONS, "relu (paper), gelu or silu (swish)", ()),
    ("--positional", "model.positional", POSITIONAL, "sinusoidal (paper) or learned", ()),
    ("--norm-first", "model.norm_first", "store_true", "pre-LN instead of the paper's post-LN", ()),
    ("--share-embeddings", "model.share_embeddings", "store_true",
     "one embedding table for both languages (needs a joint vocabulary)", ()),
    ("--tie-embeddings", "model.tie_embeddings", "store_true",
     "output projection = target embedding (section 3.4)", ()),
)
DECODER_ONLY_FLAGS = ("--decoder-layers", "--share-embeddings", "--tie-embeddings")

# flags of both training verbs (train and classify train); each has its own --lr and --schedule
RUN_FLAGS: tuple[Flag, ...] = (
    ("--vocab-size", "vocab_size", int, f"SentencePiece vocabulary size {_PRESET}", ()),
    ("--warmup", "warmup", int, f"warmup updates {_PRESET}", ()),
    ("--weight-decay", "weight_decay", float, "decoupled weight decay, AdamW (default 0: Adam)", ()),
    ("--label-smoothing", "label_smoothing", float, f"epsilon_ls {_PRESET}", ()),
    ("--subword-sampling", "subword_sampling", float, "ALPHA: subword regularization, each "
     "epoch's training text encoded anew with a unigram tokenizer's segmentations sampled "
     "(probability ~ p ** ALPHA among each word's 32 best; e.g. 0.1); validation, evaluation "
     "and translation stay deterministic (default 0: off)", ()),
    ("--clip-norm", "clip_norm", float, "gradient-norm clipping, 0 turns it off (default 1)", ()),
    ("--eval-every", "eval_every", int, f"updates between validations {_PRESET}", ()),
    ("--epochs", "epochs", int, "stop after this many epochs", ()),
    ("--max-steps", "max_steps", int, "stop after this many optimizer updates", ()),
    ("--minutes", "minutes", float, "stop after this much wall-clock time", ()),
    ("--patience", "patience", int, "stop after this many validations without improvement", ()),
    ("--seed", "seed", int, "random seed of data and training (default 0)", ()),
    ("--save-every", "save_every", int,
     "a checkpoint every N updates besides those at validations (default 0: only there)", ()),
    ("--save-minutes", "save_minutes", float, "a checkpoint at least every M minutes", ()),
    ("--precision", "precision", TRAINING_PRECISIONS, "auto (default): bf16 where this CPU or GPU "
     "runs it natively and a short probe of the model finds it faster, else fp32 (fp16 with a "
     "grad scaler on a GPU without bf16); or fp32, bf16, fp16 (GPU only)", ()),
    ("--max-bad-updates", "max_bad_updates", int, "stop after K updates in a row skipped for a "
     "non-finite loss or gradient (default 10; 0: never)", ()),
    ("--tensorboard", "tensorboard", "store_true", "also write the figures of metrics.jsonl as "
     "TensorBoard event files in RUN_DIR/tensorboard/ (training loss, learning rate, tokens/s, "
     "every validation metric; the precision and machine as text); needs the tensorboard package",
     ()),
)


CONFIG_HELP = ("the run's configuration from FILE instead of a preset: JSON as `transformer "
               "config show` prints it; flags given beside it change single fields")


def add_config_file(group: Any) -> None:
    """--config FILE of the training verbs (see transformer.config.files)."""
    group.add_argument("--config", metavar="FILE", help=CONFIG_HELP)


def no_preset_with_config(args: argparse.Namespace) -> None:
    """InputError when --config and --preset are both given: the file is a whole configuration."""
    if args.config is not None and args.preset is not None:
        raise InputError(f"--config {args.config} holds a whole configuration: give it without "
                         "--preset (`transformer config show PRESET FLAGS > FILE` writes one "
                         "from a preset)")


def add_flags(group: Any, flags: Iterable[Flag], *, skip: Iterable[str] = ()) -> None:
    """Declare configuration ``flags`` on ``group``; each stores under ``set:KEY`` (default None)."""
    left_out = set(skip)
    for flag, key, kind, text, aliases in flags:
        if flag in left_out:
            continue
        names = (flag, *aliases)
        metavar = flag.lstrip("-").replace("-", "_").upper()
        if kind == "store_true":
            group.add_argument(*names, dest=KEY + key, action="store_true", default=None, help=text)
        elif isinstance(kind, tuple):
            group.add_argument(*names, dest=KEY + key, choices=kind, default=None, help=text)
        else:
            group.add_argument(*names, dest=KEY + key, type=kind, default=None, metavar=metavar,
                               help=text)


def add_model_flags(group: Any, *, decoder: bool = True) -> None:
    """The model's shape flags (without the decoder's for an encoder-only verb)."""
    if decoder:
        add_flags(group, MODEL_FLAGS)
        return
    encoder = "the encoder's layers, N (default: the preset's, see `config show`); --encoder-layers wins"
    add_flags(group, [(flag, key, kind, encoder if flag == "--layers" else text, aliases)
                      for flag, key, kind, text, aliases in MODEL_FLAGS], skip=DECODER_ONLY_FLAGS)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration flags that were given, as ``apply_overrides`` keys."""
    return {name[len(KEY):]: value for name, value in vars(args).items()
            if name.startswith(KEY) and value is not None}


def flag_of(key: str, *tables: Iterable[Flag]) -> str:
    """The flag that sets ``key`` (for error messages)."""
    for table in tables or (MODEL_FLAGS, RUN_FLAGS):
        for flag, known, *_ in table:
            if known == key:
                return flag
    return "--" + key.rpartition(".")[2].replace("_", "-")


def emit_json(obj: Any) -> None:
    """Print one JSON object on stdout (every verb's ``--json``)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, sort_keys=True) + "\n")
    sys.stdout.flush()


def add_json(p: argparse.ArgumentParser, text: str = "print one JSON object") -> None:
    p.add_argument("--json", action="store_true", help=text)


# one default and one meaning per flag across verbs (tests/cli/test_help.py holds them to it)
DEVICE_HELP = "auto (default): the GPU when there is one, else the CPU; or cpu, cuda, cuda:N"
THREADS_HELP = "CPU threads for PyTorch (default: PyTorch's, one per core)"
PROGRESS_HELP = "progress bar on stderr (default: when stderr is a terminal)"


def add_model_dir(p: Any, *, text: str = "model directory") -> None:
    """--model RUN_DIR (required): the model directory a verb reads."""
    p.add_argument("--model", required=True, metavar="RUN_DIR", help=text)


def add_inference_precision(p: Any, *, what: str, int8: str) -> None:
    """--precision auto|fp32|bf16|int8 (default auto) of the verbs that run a model: ``what`` it
    sets and what ``int8`` does in this verb."""
    p.add_argument("--precision", choices=INFERENCE_PRECISIONS, default="auto",
                   help=f"{what}: auto (default): bf16 where this CPU or GPU runs it natively and "
                   f"a short probe finds it faster, else fp32; fp32; bf16; int8: {int8}")


def add_device_threads(p: Any, *, threads_default: int | None = None, threads_note: str = "") -> None:
    """--device (default auto) and --threads; ``threads_note`` says why a verb differs."""
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    threads_help = THREADS_HELP if threads_default is None else (
        f"CPU threads for PyTorch (default {threads_default})")
    p.add_argument("--threads", type=int, default=threads_default,
                   help=threads_help + (f"; {threads_note}" if threads_note else ""))


def add_training_run(p: Any, *, threads_default: int | None = None, threads_note: str = "") -> None:
    """--device (default auto), --threads, --progress and --json of the training verbs."""
    add_device_threads(p, threads_default=threads_default, threads_note=threads_note)
    add_progress(p)
    add_json(p)


def add_progress(p: Any) -> None:
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help=PROGRESS_HELP)


def progress(args: argparse.Namespace) -> bool:
    return args.progress if args.progress is not None else sys.stderr.isatty()


def device(name: str) -> Any:
    """``--device`` as a torch.device (``auto``: CUDA when available); bad names are bad input."""
    from transformer.hardware import resolve_device

    try:
        return resolve_device(name)
    except ValueError as err:
        raise InputError(f"--device {name!r}: {err}") from None


def inference_device(name: str, precision: str) -> Any:
    """``--device`` for decoding at ``precision``: int8 decodes on the CPU (PyTorch's int8 kernels
    are CPU kernels), so ``auto`` on a machine with a GPU takes the CPU and says so in one line,
    and an explicit CUDA device is refused. ``auto`` or ``cpu`` where no CUDA device can be gives
    the name ``"cpu"``, without importing PyTorch (an engine of its own may decode)."""
    from transformer.hardware import cuda_surely_absent

    if name in ("auto", "cpu") and cuda_surely_absent():
        return "cpu"
    import torch

    if precision != "int8":
        return device(name)
    if name == "auto":
        if torch.cuda.is_available():
            logging.getLogger(__name__).info("--precision int8 decodes on the CPU (int8 kernels "
                                             "are CPU kernels); the GPU is not used")
        return torch.device("cpu")
    chosen = device(name)
    if chosen.type != "cpu":
        raise InputError(f"--precision int8 decodes on the CPU only, not --device {name}; use "
                         "--device cpu (or auto), or --precision auto/fp32/bf16 on the GPU")
    return chosen


def set_threads(threads: int | None) -> None:
    """``--threads``: PyTorch's intra-op threads (and CTranslate2's), set without importing
    PyTorch when it is not yet (:func:`transformer.hardware.set_intra_op_threads`)."""
    if threads is not None:
        if threads < 1:
            raise InputError(f"--threads must be at least 1, got {threads}")
        from transformer.hardware import set_intra_op_threads

        set_intra_op_threads(threads)


def did_you_mean(value: object, choices: Iterable[str]) -> str:
    """The choices in one line, and the closest to ``value`` when one is close:
    ``"choose from tiny, small, base (did you mean 'small'?)"``."""
    choices = [str(choice) for choice in choices]
    text = f"choose from {', '.join(choices)}"
    close = difflib.get_close_matches(str(value), choices, n=1)
    return text + (f" (did you mean {close[0]!r}?)" if close else "")


def flag_names(*tables: Iterable[Flag]) -> dict[str, str]:
    """Configuration field -> the flag that sets it, for the flags of ``tables`` (default: the
    model's and the run's); a nested field (``model.d_model``) also by its own name."""
    names: dict[str, str] = {}
    for table in tables or (MODEL_FLAGS, RUN_FLAGS):
        for flag, key, *_ in table:
            names.setdefault(key, flag)
            names.setdefault(key.rpartition(".")[2], flag)
    return names


def as_input_error(call: Callable[[], Any], *tables: Iterable[Flag]) -> Any:
    """``call()``, with a ValueError (a bad value or combination) turned into bad input in one
    line: a :class:`~transformer.config.field_error.ConfigError` names the flags of ``tables``
    (default: the model's and the run's) in its fields' place."""
    from transformer.config.field_error import ConfigError

    try:
        return call()
    except InputError:
        raise
    except ConfigError as err:
        raise InputError(err.named(flag_names(*tables))) from None
    except ValueError as err:
        raise InputError(str(err).splitlines()[0]) from None
