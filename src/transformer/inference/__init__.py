"""Inference: a model directory loaded once, typed, and used: translate, classify, score.

    from transformer.inference import load_translator, load_classifier
    translator = load_translator("runs/m30k", beam_size=4)
    translator.translate(["A man rides a horse."])[0].text
    load_classifier("runs/nsmc").predict(["재밌어요"]).labels(0)
    score_pairs(load_scorer("runs/m30k"), ["A dog runs."], ["Ein Hund rennt."])[0].log_prob
    load_translator("runs/m30k", alignments=True)   # translate_lines then gives each line's pairs
    for event in stream_translation(translator, [paragraph]): ...   # sentence by sentence

One floor above ``decoding`` (search and its fast path) and ``evaluation`` (metrics); the verbs,
the server and Python all come through :mod:`transformer.inference.loader`. The names load on
first use (:mod:`transformer.lazy_names`): decoding on CTranslate2 imports no PyTorch.
"""

from typing import TYPE_CHECKING

from transformer.lazy_names import lazy_names

if TYPE_CHECKING:
    from transformer.config.decoding import DecodeOptions
    from transformer.inference.alignment import AlignmentRule, align_texts, pharaoh
    from transformer.inference.classifier import Classifier, Predictions
    from transformer.inference.classifier_eval import evaluate_classifier, evaluation_data
    from transformer.inference.lines import LineTranslation, translate_lines
    from transformer.inference.loader import (
        classifier_for,
        load_classifier,
        load_translator,
        translator_for,
    )
    from transformer.inference.scoring import PairScore, Scorer, load_scorer, score_pairs
    from transformer.inference.streaming import (
        SentenceDone,
        StreamDone,
        TokenDone,
        stream_translation,
    )
    from transformer.inference.translation_eval import evaluate_translation, read_test_set
    from transformer.inference.translator import Translation, Translator

__all__ = [
    "Classifier", "DecodeOptions", "LineTranslation", "Predictions", "Translation", "Translator",
    "classifier_for", "evaluate_classifier", "evaluate_translation", "evaluation_data",
    "load_classifier", "load_translator", "read_test_set", "translate_lines", "translator_for",
    "AlignmentRule", "PairScore", "Scorer", "align_texts", "load_scorer", "pharaoh", "score_pairs",
    "SentenceDone", "StreamDone", "TokenDone", "stream_translation",
]
__getattr__, __dir__ = lazy_names(__name__, {
    "transformer.config.decoding": ("DecodeOptions",),
    "transformer.inference.alignment": ("AlignmentRule", "align_texts", "pharaoh"),
    "transformer.inference.classifier": ("Classifier", "Predictions"),
    "transformer.inference.classifier_eval": ("evaluate_classifier", "evaluation_data"),
    "transformer.inference.lines": ("LineTranslation", "translate_lines"),
    "transformer.inference.loader": ("classifier_for", "load_classifier", "load_translator", "translator_for"),
    "transformer.inference.scoring": ("PairScore", "Scorer", "load_scorer", "score_pairs"),
    "transformer.inference.streaming": ("SentenceDone", "StreamDone", "TokenDone", "stream_translation"),
    "transformer.inference.translation_eval": ("evaluate_translation", "read_test_set"),
    "transformer.inference.translator": ("Translation", "Translator"),
})
