"""score_translations reproduces sacreBLEU's own corpus scores and signatures."""

from __future__ import annotations

import pytest
import sacrebleu

from transformer.evaluation.bleu import score_translations

HYPS = ["The cat sat on the mat.", "A man is Riding a horse .", "", "two dogs play in the snow"]
REFS = ["The cat sat on a mat.", "A man is riding a horse.", "Nothing here.", "Two dogs are playing in snow."]


def test_matches_sacrebleu():
    scores = score_translations(HYPS, REFS)
    assert scores.bleu == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score)
    assert scores.chrf == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    lc = sacrebleu.corpus_bleu(HYPS, [REFS], lowercase=True, tokenize="13a").score
    assert scores.bleu_lc == pytest.approx(lc)
    assert scores.bleu_lc > scores.bleu, "lowercasing forgives 'Riding' and 'Two'"
    assert scores.sentences == 4


def test_signatures():
    scores = score_translations(HYPS, REFS)
    version = f"version:{sacrebleu.__version__}"
    assert "case:mixed" in scores.bleu_signature and "tok:13a" in scores.bleu_signature
    assert "case:lc" in scores.bleu_lc_signature
    assert "nc:6" in scores.chrf_signature
    assert all(version in s for s in (scores.bleu_signature, scores.chrf_signature))
    assert scores.summary().count("\n") == 2
    assert set(scores.to_dict()) >= {"bleu", "chrf", "bleu_lc", "bleu_signature"}


def test_perfect_and_mismatched():
    assert score_translations(REFS, REFS).bleu == pytest.approx(100.0)
    with pytest.raises(ValueError, match="3 hypotheses but 4 references"):
        score_translations(HYPS[:3], REFS)
