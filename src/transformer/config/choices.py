"""Every closed set of option values, defined once; configs, the CLI and the library import them here.

Plain tuples (no torch import), so the command line can offer them as ``choices``.
"""

from __future__ import annotations

# model (ModelConfig, TransformerClassifier)
ACTIVATIONS = ("relu", "gelu", "silu")  # silu = swish (Marian)
POSITIONAL = ("sinusoidal", "learned")
# the sinusoidal table: sin/cos interleaved (the paper, eq. in 3.5) or all sines then all cosines
# (tensor2tensor, Marian)
POSITIONAL_LAYOUTS = ("interleaved", "halves")
POOLING = ("mean", "cls")
PRESETS = ("tiny", "small", "base", "big")

# data and tokenizer
TRANSLATION_CORPORA = ("multi30k", "numbers")  # translation corpora known by name
CLASSIFIER_CORPORA = ("nsmc", "goemotions")  # classification corpora known by name
TOKENIZER_TYPES = ("bpe", "unigram", "char", "word")  # SentencePiece model types

# training
PRECISIONS = ("fp32", "bf16", "fp16")  # what a training loop runs
# what a training run may ask for: "auto" is resolved by transformer.precision on the machine
TRAINING_PRECISIONS = ("auto", *PRECISIONS)
INFERENCE_PRECISIONS = ("auto", "fp32", "bf16", "int8")  # translate, evaluate, serve
# what decodes a translation: auto (the faster for the model, precision and machine), ours, CTranslate2
ENGINES = ("auto", "torch", "ctranslate2")
ON_LONG = ("truncate", "filter")  # a sequence longer than max_len: cut it, or drop the example
TRANSLATION_SCHEDULES = ("noam", "inverse_sqrt", "constant")
CLASSIFIER_SCHEDULES = ("inverse_sqrt", "linear")
SCHEDULES = ("noam", "inverse_sqrt", "constant", "linear")  # every schedule training/schedule.py has
TRANSLATION_METRICS = ("bleu", "chrf", "exact_match")  # what selects the best translation model
CLASSIFIER_METRICS = ("accuracy", "f1", "macro_f1", "micro_f1")
METRICS = TRANSLATION_METRICS + CLASSIFIER_METRICS  # every validation metric metrics.jsonl may hold
# what `evaluate --metrics` may score a test set with (sacreBLEU's corpus metrics), and its default
SCORE_METRICS = ("bleu", "chrf", "ter")
DEFAULT_SCORE_METRICS = ("bleu", "chrf")
POS_WEIGHTS = ("none", "sqrt")

# where things run
DEVICES = ("cuda", "cpu")
TASKS = ("translation", "classification")


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    """Raise :class:`~transformer.config.field_error.ChoiceError` naming ``name`` and the choices
    unless ``value`` is one of ``choices``."""
    if value not in choices:
        from transformer.config.field_error import ChoiceError

        raise ChoiceError(name, value, choices)
