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


def test_ter_matches_sacrebleu_and_only_the_metrics_asked_are_scored():
    scores = score_translations(HYPS, REFS, metrics=("bleu", "chrf", "ter"))
    assert scores.ter == pytest.approx(sacrebleu.corpus_ter(HYPS, [REFS]).score)
    assert "tok:tercom" in scores.ter_signature and scores.summary().count("\n") == 3
    assert scores.summary().splitlines()[-1].startswith("TER")
    assert score_translations(REFS, REFS, metrics=("ter",)).ter == pytest.approx(0.0)
    default = score_translations(HYPS, REFS)
    assert default.ter is None and "ter" not in default.to_dict()
    only_ter = score_translations(HYPS, REFS, metrics=("ter",))
    assert set(only_ter.to_dict()) == {"ter", "ter_signature", "sentences"}
    assert only_ter.summary().startswith("TER") and "\n" not in only_ter.summary()


def test_an_unknown_metric_is_named():
    with pytest.raises(ValueError, match="unknown metric 'blue'"):
        score_translations(HYPS, REFS, metrics=("bleu", "blue"))
