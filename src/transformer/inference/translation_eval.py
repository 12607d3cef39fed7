"""Scoring a translator on a test set: what ``transformer evaluate`` does, as a library function.

    translator = load_translator("runs/m30k", beam_size=4)
    result = evaluate_translation(translator, data="multi30k")   # BLEU, chrF
    result = evaluate_translation(translator, data="multi30k", metrics=("bleu", "chrf", "ter"))

The test set is two line-aligned files, or a split of a corpus by name (by default the one the
run trained on, in its languages: the record's ``trained_on``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from transformer.config.choices import DEFAULT_SCORE_METRICS
from transformer.errors import InputError
from transformer.inference.translator import Translator
from transformer.model_dir import RunRecord, TrainedOn


def read_test_set(
    record: RunRecord | None,
    *,
    data: str | None = None,
    split: str | None = None,
    src: str | None = None,
    tgt: str | None = None,
    src_file: str | None = None,
    ref_file: str | None = None,
) -> tuple[list[str], list[str], str]:
    """``(sources, references, name)`` of a test set: two line-aligned files, or a split of a
    corpus by name (default: the one the run of ``record`` trained on, in its languages; without
    a record, Multi30k English-German)."""
    from transformer.data.parallel import read_lines

    if (src_file is None) != (ref_file is None):
        raise InputError("give both --src-file and --ref-file, or neither")
    if src_file is not None and ref_file is not None:
        sources, references = read_lines(src_file), read_lines(ref_file)
        if len(sources) != len(references):
            raise InputError(f"{src_file} has {len(sources)} lines but {ref_file} has "
                             f"{len(references)}; line i of one must translate line i of the other")
        return sources, references, f"{src_file} -> {ref_file}"
    trained_on = record.trained_on if record is not None else TrainedOn()
    data = data or trained_on.corpus or "multi30k"
    if data == "numbers":
        from transformer.data.builtin_task import number_task_splits

        splits = number_task_splits(trained_on.seed)
        split = split or "test"
        if split not in splits:
            raise InputError(f"unknown numbers split {split!r}: expected one of {', '.join(splits)}")
        corpus = splits[split]
    elif data == "multi30k":
        from transformer.data.corpora import load_corpus

        corpus = load_corpus("multi30k", split or "test_2016_flickr",
                             src or (record and record.src_lang) or "en",
                             tgt or (record and record.tgt_lang) or "de")
    else:
        raise InputError(f"unknown corpus {data!r}: use --data multi30k or numbers, or "
                         "--src-file/--ref-file")
    return corpus.src, corpus.tgt, corpus.name


@dataclass(frozen=True)
class TranslationScore:
    """The test set's name, the hypotheses and their sacreBLEU scores."""

    name: str
    hypotheses: list[str]
    scores: Any  # evaluation.bleu's scores: BLEU, chrF (TER when asked), signatures
    unknown_lines: int = 0  # source lines with pieces the model's vocabulary lacks (warned about)
    cut: int = 0  # sentences longer than the model's positions, cut to fit (never truncated)


def evaluate_translation(translator: Translator, *, hyp_out: str | None = None,
                         split_sentences: bool = True,
                         metrics: Sequence[str] = DEFAULT_SCORE_METRICS, progress: bool = False,
                         **test_set: Any) -> TranslationScore:
    """Translate the test set (``test_set``: the keywords of :func:`read_test_set`) and score it
    with ``metrics`` (any of bleu, chrf, ter: :func:`transformer.evaluation.bleu.score_translations`;
    ValueError for another, before anything is translated); with ``hyp_out`` the translations are also written there, atomically. Each source line is
    split into sentences unless ``split_sentences`` is False
    (:func:`transformer.inference.lines.translate_lines`; the metrics need the texts only, so no
    log-probabilities are computed); ``progress``: a bar over the batches."""
    from transformer.evaluation.bleu import check_metrics, score_translations
    from transformer.inference.lines import translate_lines
    from transformer.inference.unknown import UnknownPieces

    metrics = check_metrics(metrics)
    record = translator.record
    sources, references, name = read_test_set(record, **test_set)
    unknown = UnknownPieces(translator.src_tokenizer, source=test_set.get("src_file") or name)
    for number, line in enumerate(sources, start=1):
        unknown.check(number, line)
    src_lang, tgt_lang = record.languages if record is not None else ("en", None)
    found = translate_lines(translator, sources, split=split_sentences, src_lang=src_lang,
                            tgt_lang=tgt_lang, log_probs=False, progress=progress)
    hypotheses = [t.text for t in found]
    if hyp_out is not None:
        from transformer.atomic import atomic_write_bytes

        atomic_write_bytes(hyp_out, "".join(f"{h}\n" for h in hypotheses).encode("utf-8"))
    return TranslationScore(name=name, hypotheses=hypotheses, unknown_lines=len(unknown.lines),
                            scores=score_translations(hypotheses, references, metrics=metrics),
                            cut=sum(t.cut for t in found))
