"""The one way from a model directory to something that translates or classifies: what
``translate``, ``evaluate``, ``classify predict``, ``attention``, ``serve`` and Python all use.

    translator = load_translator("runs/m30k", beam_size=4)   # Translator (weights packed once)
    translator.translate(["A man rides a horse."])
    classifier = load_classifier("runs/nsmc")                 # Classifier
    classifier.predict(["재밌어요"])

A directory is read once (:func:`transformer.model_dir.load_model_dir`: its record checked, its
shapes compared with the weights before anything is allocated); :func:`translator_for` and
:func:`classifier_for` turn an already loaded one into a translator or a classifier, choosing the
precision (:func:`transformer.precision.for_inference`) and the decoding options (the run's length
limits, then the caller's). A new decoding option passes through here and
:class:`~transformer.config.decoding.DecodeOptions` only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformer.config.choices import INFERENCE_PRECISIONS
from transformer.config.decoding import FLAGS, DecodeOptions, OptionError, check_for_model
from transformer.errors import InputError
from transformer.inference.engines import check_engine, choose_engine, translator_with_engine
from transformer.inference.translator import Translator
from transformer.model_dir.directory import LoadedModel, load_model_dir

# a translator that decodes on CTranslate2 is read and run without PyTorch (a classifier, ours
# and the precision probe import it)
if TYPE_CHECKING:
    import torch

    from transformer.inference.classifier import Classifier


def resolve_precision(loaded: LoadedModel, precision: str) -> str:
    """Resolve ``precision`` for ``loaded`` and cast its weights; returns what runs: fp32, bf16,
    or int8 for a translator (a classifier asked for int8 runs float32).

    ``auto`` is resolved per model (:func:`transformer.precision.for_inference`). int8 keeps the
    float32 weights: a translator's decoder quantizes its linear layers once when it is built
    (:class:`~transformer.decoding.fast_decoder.FastDecoder`)."""
    if precision not in INFERENCE_PRECISIONS:
        raise InputError(f"--precision must be one of {', '.join(INFERENCE_PRECISIONS)}, "
                         f"got {precision!r}")
    if precision == "int8" and not loaded.record.is_translation:
        return "fp32"
    if precision not in ("auto", "bf16"):
        return precision  # as asked: nothing to probe or cast (the model is read when ours decodes)
    from transformer.precision import for_inference

    return for_inference(loaded.model, precision).precision


def translator_for(loaded: LoadedModel, *, precision: str = "auto", batch_size: int = 64,
                   engine: str = "auto", **options: Any) -> Translator:
    """A :class:`Translator` over an already loaded translation model.

    ``options`` are fields of :class:`~transformer.config.decoding.DecodeOptions` (``beam_size``,
    ``length_penalty``, ``nbest``, ``max_len_a``, ``max_len_b``, ``max_len``, ``sampling``,
    ``sampling_topk``, ``sampling_topp``, ``temperature``, ``seed``, ``target_prefix``,
    ``no_repeat_ngram``, ``repetition_penalty``, ``min_length``, ``forbid``, ``alignments``): the
    translator's default for a call that gives none; one that is absent or None takes the run's value
    (the length limits it trained with) or the default of
    :mod:`transformer.config.decoding` (the paper's beam search; beam 1 with ``sampling``).
    ``precision``: ``auto`` (bf16 where this machine runs it natively and a probe of the model
    decodes faster in it, else fp32), ``fp32``, ``bf16`` (casts the weights) or ``int8`` (int8
    weights made once, on a CPU). ``engine``: ``auto`` (the faster for this model, precision and
    machine), ``torch`` (ours) or ``ctranslate2`` (:mod:`transformer.inference.engines`; the
    translator's ``engine`` says which runs). Bad values raise InputError naming them.
    """
    _check_options(batch_size, options, engine)
    if loaded.tgt_tokenizer is None:
        raise InputError(f"{Path(loaded.record.source).parent} holds a classifier; use transformer "
                         "classify predict")
    try:
        decode = loaded.record.decode_options(
            **{name: value for name, value in options.items() if value is not None})
        check_for_model(decode, model_max_len=loaded.config.max_len)
    except OptionError as err:
        raise InputError(err.named(FLAGS)) from None
    chosen, asked_precision, why = choose_engine(loaded, engine=engine, precision=precision, options=decode)
    runs = resolve_precision(loaded, asked_precision)  # the probe times the engine that decodes
    try:
        translator = translator_with_engine(loaded, engine=chosen, asked=engine, why=why,
                                            options=decode, batch_size=batch_size, precision=runs)
    except ValueError as err:
        if isinstance(err, InputError):
            raise
        raise InputError(f"--precision {runs}: {err}") from None
    # ours packs (or quantizes) the weights now, not on a first call
    if translator.engine == "torch" and translator.decoder is not None:
        translator.decoder.steps()
    return translator


def _check_options(batch_size: int, options: dict[str, Any], engine: str = "auto") -> None:
    """The checks that need no model, so that a bad value fails before a model is read: the
    options alone (a run's length limits aside), named by their flags."""
    check_engine(engine)
    if batch_size < 1:
        raise InputError(f"--batch-size must be positive, got {batch_size}")
    unknown = sorted(set(options) - set(FLAGS))
    if unknown:
        raise InputError(f"unknown decoding option {unknown[0]!r} (known: {', '.join(FLAGS)})")
    try:
        DecodeOptions(**{name: value for name, value in options.items() if value is not None})
    except OptionError as err:
        raise InputError(err.named(FLAGS)) from None


def classifier_for(loaded: LoadedModel, *, precision: str = "fp32") -> Classifier:
    """A :class:`Classifier` over an already loaded classification model (``precision`` as for
    :func:`resolve_precision`; the default keeps the stored float32 weights)."""
    from transformer.inference.classifier import Classifier

    classifier = Classifier(loaded)
    if precision != "fp32":
        classifier.precision = resolve_precision(loaded, precision)
    return classifier


def load_translator(model_dir: str | Path, *, device: str | torch.device = "cpu",
                    precision: str = "auto", batch_size: int = 64, engine: str = "auto",
                    **options: Any) -> Translator:
    """Load ``model_dir`` and return its :class:`Translator` (:func:`translator_for` says what
    ``precision``, ``batch_size`` and the decoding ``options`` mean). InputError, naming the file
    or value, for a directory that is missing, damaged, a classifier, or a bad option (checked
    before the directory is read)."""
    _check_options(batch_size, options, engine)
    # the weights are read once an engine that needs them is chosen (CTranslate2 has its own)
    return translator_for(load_model_dir(model_dir, device=device, lazy=True), precision=precision,
                          batch_size=batch_size, engine=engine, **options)


def load_classifier(model_dir: str | Path, *, device: str | torch.device = "cpu",
                    precision: str = "fp32") -> Classifier:
    """Load ``model_dir`` and return its :class:`Classifier`; InputError, naming the file, for a
    directory that is missing, damaged or a translation model."""
    return classifier_for(load_model_dir(model_dir, device=device), precision=precision)
