"""Translating and scoring with a model directory: what ``transformer translate`` and
``transformer evaluate`` do, as library functions.

    translator, loaded = load_translator("runs/m30k", beam_size=4)
    result = evaluate_translation(translator, loaded, data="multi30k")   # BLEU, chrF
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformer.errors import InputError


def load_translator(
    model_dir: str | Path,
    *,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    nbest: int | None = None,
    max_len_a: float | None = None,
    max_len_b: int | None = None,
    max_len: int | None = None,
    batch_size: int = 64,
    precision: str = "auto",
    device: Any = "cpu",
) -> tuple[Any, Any]:
    """A ``Translator`` over the model in ``model_dir`` and the ``LoadedModel`` it wraps.

    ``max_len_a``/``max_len_b`` default to the run's training setting (else 1.5 and 10);
    ``precision``: ``auto`` (bf16 where this machine runs it natively and a probe of the model
    decodes faster in it, else fp32: :mod:`transformer.precision`), ``fp32``, ``bf16`` (casts the
    weights) or ``int8`` (int8 weights made once, on a CPU). Bad values raise InputError naming
    them.
    """
    from transformer.decoding.translator import DecodeOptions, Translator
    from transformer.model_dir import load_model_dir

    if batch_size < 1:
        raise InputError(f"--batch-size must be positive, got {batch_size}")
    if nbest is not None and not 1 <= nbest <= beam_size:
        raise InputError(f"--nbest must be between 1 and --beam {beam_size}, got {nbest}")
    loaded = load_model_dir(model_dir, device=device)
    if loaded.tgt_tokenizer is None:
        raise InputError(f"{model_dir} holds a classifier; use transformer classify predict")
    from transformer.precision import for_inference

    precision = for_inference(loaded.model, precision).precision
    training = loaded.config.get("training", {})
    source = Path(model_dir) / "config.json"
    if not isinstance(training, dict):
        raise InputError(f"{source}: 'training' must be a JSON object")
    if max_len_a is None:
        max_len_a = _stored_number(training, "decode_max_len_a", 1.5, source=source)
    if max_len_b is None:
        max_len_b = _stored_number(training, "decode_max_len_b", 10, source=source, integer=True)
    try:
        options = DecodeOptions(
            beam_size=beam_size, length_penalty=length_penalty, nbest=nbest,
            max_len_a=max_len_a, max_len_b=max_len_b, max_len=max_len,
        )
    except ValueError as err:
        raise InputError(str(err)) from None
    try:
        translator = Translator.from_loaded(loaded, options=options, batch_size=batch_size,
                                            precision=precision)
    except ValueError as err:
        raise InputError(f"--precision {precision}: {err}") from None
    return translator, loaded


def _stored_number(training: dict[str, Any], key: str, default: float, *, source: Path,
                   integer: bool = False) -> Any:
    """``training[key]`` (``default`` when absent), InputError naming it when not a number."""
    value = training.get(key, default)
    kinds = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
        raise InputError(f"{source}: training.{key} must be a number, got {value!r}")
    return value


def read_test_set(
    training: dict[str, Any],
    *,
    data: str | None = None,
    split: str | None = None,
    src: str | None = None,
    tgt: str | None = None,
    src_file: str | None = None,
    ref_file: str | None = None,
) -> tuple[list[str], list[str], str]:
    """``(sources, references, name)`` of a test set: two line-aligned files, or a split of a
    corpus by name (default: the one the run in ``training`` trained on, in its languages)."""
    from transformer.data.parallel import read_lines

    if (src_file is None) != (ref_file is None):
        raise InputError("give both --src-file and --ref-file, or neither")
    if src_file is not None and ref_file is not None:
        sources, references = read_lines(src_file), read_lines(ref_file)
        if len(sources) != len(references):
            raise InputError(f"{src_file} has {len(sources)} lines but {ref_file} has "
                             f"{len(references)}; line i of one must translate line i of the other")
        return sources, references, f"{src_file} -> {ref_file}"
    data = data or training.get("data") or "multi30k"
    if data == "numbers":
        from transformer.data.builtin_task import number_task_splits

        splits = number_task_splits(training.get("seed", 0))
        split = split or "test"
        if split not in splits:
            raise InputError(f"unknown numbers split {split!r}: expected one of {', '.join(splits)}")
        corpus = splits[split]
    elif data == "multi30k":
        from transformer.data.corpora import load_corpus

        corpus = load_corpus("multi30k", split or "test_2016_flickr",
                             src or training.get("src_lang", "en"),
                             tgt or training.get("tgt_lang", "de"))
    else:
        raise InputError(f"unknown corpus {data!r}: use --data multi30k or numbers, or "
                         "--src-file/--ref-file")
    return corpus.src, corpus.tgt, corpus.name


@dataclass(frozen=True)
class TranslationScore:
    """The test set's name, the hypotheses and their sacreBLEU scores."""

    name: str
    hypotheses: list[str]
    scores: Any  # evaluation.bleu's scores: BLEU, chrF, signatures
    unknown_lines: int = 0  # source lines with pieces the model's vocabulary lacks (warned about)
    cut: int = 0  # sentences longer than the model's positions, cut to fit (never truncated)


def evaluate_translation(translator: Any, loaded: Any, *, hyp_out: str | None = None,
                         split_sentences: bool = True, **test_set: Any) -> TranslationScore:
    """Translate the test set (``test_set``: the keywords of :func:`read_test_set`) and score it;
    with ``hyp_out`` the translations are also written there, atomically. Each source line is
    split into sentences unless ``split_sentences`` is False
    (:func:`transformer.decoding.paragraphs.translate_lines`)."""
    from transformer.decoding.paragraphs import languages_of, translate_lines
    from transformer.decoding.unknown import UnknownPieces
    from transformer.evaluation.bleu import score_translations

    sources, references, name = read_test_set(loaded.config.get("training", {}), **test_set)
    unknown = UnknownPieces(translator.src_tokenizer, source=test_set.get("src_file") or name)
    for number, line in enumerate(sources, start=1):
        unknown.check(number, line)
    src_lang, tgt_lang = languages_of(loaded.config)
    found = translate_lines(translator, sources, split=split_sentences, src_lang=src_lang,
                            tgt_lang=tgt_lang)
    hypotheses = [t.text for t in found]
    if hyp_out is not None:
        from transformer.atomic import atomic_write_bytes

        atomic_write_bytes(hyp_out, "".join(f"{h}\n" for h in hypotheses).encode("utf-8"))
    return TranslationScore(name=name, hypotheses=hypotheses, unknown_lines=len(unknown.lines),
                            scores=score_translations(hypotheses, references),
                            cut=sum(t.cut for t in found))
