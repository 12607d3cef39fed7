"""Classification metrics against hand-computed references, and threshold tuning."""

from __future__ import annotations

import numpy as np
import pytest

from transformer.evaluation.label_metrics import (
    classification_report,
    decide,
    default_grid,
    per_label_f1,
    to_indicator,
    tune_thresholds,
)


def test_single_label_report_matches_hand_computation():
    # gold 0 0 1 2 2 2, predicted 0 1 1 2 2 0
    gold = to_indicator([[0], [0], [1], [2], [2], [2]], num_labels=3)
    pred = to_indicator([[0], [1], [1], [2], [2], [0]], num_labels=3)
    report = classification_report(gold, pred, label_names=["a", "b", "c"])
    # a: TP 1 FP 1 FN 1; b: TP 1 FP 1 FN 0; c: TP 2 FP 0 FN 1
    rows = {row.label: row for row in report.labels}
    assert (rows["a"].precision, rows["a"].recall, rows["a"].f1) == pytest.approx((1 / 2, 1 / 2, 1 / 2))
    assert (rows["b"].precision, rows["b"].recall, rows["b"].f1) == pytest.approx((1 / 2, 1, 2 / 3))
    assert (rows["c"].precision, rows["c"].recall, rows["c"].f1) == pytest.approx((1, 2 / 3, 4 / 5))
    assert [r.support for r in report.labels] == [2, 1, 3]
    assert [r.predicted for r in report.labels] == [2, 2, 2]
    assert report.accuracy == pytest.approx(4 / 6)
    assert report.micro_f1 == pytest.approx(report.accuracy)  # single-label: micro-F1 = accuracy
    assert report.macro_precision == pytest.approx((1 / 2 + 1 / 2 + 1) / 3)
    assert report.macro_recall == pytest.approx((1 / 2 + 1 + 2 / 3) / 3)
    assert report.macro_f1 == pytest.approx((1 / 2 + 2 / 3 + 4 / 5) / 3)
    assert report.num_examples == 6


def test_multi_label_report_matches_hand_computation():
    gold = np.array([[1, 1, 0], [0, 1, 0], [1, 0, 1], [0, 0, 0]], dtype=bool)
    pred = np.array([[1, 0, 0], [0, 1, 1], [1, 0, 1], [0, 0, 0]], dtype=bool)
    report = classification_report(gold, pred)
    # label 0: TP 2; label 1: TP 1 FN 1; label 2: TP 1 FP 1
    assert [r.f1 for r in report.labels] == pytest.approx([1, 2 / 3, 2 / 3])
    assert report.accuracy == pytest.approx(2 / 4)  # exact match: rows 2 and 3
    # micro: TP 4, FP 1, FN 1
    assert (report.micro_precision, report.micro_recall, report.micro_f1) == pytest.approx(
        (4 / 5, 4 / 5, 4 / 5)
    )
    assert report.macro_f1 == pytest.approx(7 / 9)
    assert per_label_f1(gold, pred) == pytest.approx([1, 2 / 3, 2 / 3])


def test_undefined_ratios_are_zero_and_count_in_the_macro_mean():
    gold = np.array([[1, 0], [1, 0]], dtype=bool)  # label 1 never occurs nor is predicted
    pred = np.array([[1, 0], [1, 0]], dtype=bool)
    report = classification_report(gold, pred)
    assert [r.f1 for r in report.labels] == [1.0, 0.0]
    assert report.macro_f1 == pytest.approx(0.5)
    assert report.micro_f1 == pytest.approx(1.0)
    empty = classification_report(np.zeros((0, 2), bool), np.zeros((0, 2), bool))
    assert empty.accuracy == 0.0 and empty.macro_f1 == 0.0


def test_report_is_json_ready_and_formats_a_table():
    import json

    report = classification_report(np.eye(2, dtype=bool), np.eye(2, dtype=bool), label_names=["neg", "pos"])
    data = json.loads(json.dumps(report.to_dict()))
    assert data["accuracy"] == 1.0 and [row["label"] for row in data["labels"]] == ["neg", "pos"]
    table = report.format()
    assert "neg" in table and "macro avg" in table and "precision" in table


def test_decide_single_and_multi_label():
    probs = np.array([[0.2, 0.7, 0.1], [0.5, 0.1, 0.4]])
    assert decide(probs, multi_label=False).tolist() == [[False, True, False], [True, False, False]]
    assert decide(probs, multi_label=True).tolist() == [[False, True, False], [True, False, False]]
    assert decide(probs, multi_label=True, thresholds=[0.6, 0.05, 0.1]).tolist() == [
        [False, True, True],
        [False, True, True],
    ]
    with pytest.raises(ValueError, match="thresholds"):
        decide(probs, multi_label=True, thresholds=[0.5])


def test_to_indicator_rejects_out_of_range_labels():
    assert to_indicator([[0, 2], []], num_labels=3).tolist() == [[True, False, True], [False] * 3]
    with pytest.raises(ValueError, match="label index 3"):
        to_indicator([[3]], num_labels=3)


def test_tuned_thresholds_on_a_crafted_case():
    probs = np.array(
        [[0.9, 0.6, 0.55], [0.4, 0.7, 0.95], [0.3, 0.8, 0.2], [0.1, 0.2, 0.1]]
    )
    gold = np.array([[1, 0, 0], [1, 0, 1], [0, 0, 0], [0, 0, 0]], dtype=bool)
    thresholds = tune_thresholds(probs, gold)
    # label 0: any t in (0.3, 0.4] separates perfectly, 0.40 is nearest 0.5;
    # label 1 has no positives: F1 is 0 everywhere, so it keeps 0.5;
    # label 2: t in (0.55, 0.95] is perfect, 0.56 is nearest 0.5.
    assert thresholds == pytest.approx([0.40, 0.5, 0.56])
    assert per_label_f1(gold, decide(probs, multi_label=True, thresholds=thresholds))[[0, 2]] == pytest.approx([1, 1])


@pytest.mark.parametrize("seed", range(5))
def test_tuning_never_lowers_validation_macro_f1(seed):
    rng = np.random.default_rng(seed)
    n, c = 200, 6
    gold = rng.random((n, c)) < np.linspace(0.02, 0.5, c)  # rare to common labels
    probs = np.clip(0.3 * gold + rng.random((n, c)) * 0.7, 0, 1)  # informative but noisy
    tuned = tune_thresholds(probs, gold)
    base = classification_report(gold, decide(probs, multi_label=True)).macro_f1
    after = classification_report(gold, decide(probs, multi_label=True, thresholds=tuned)).macro_f1
    assert after >= base
    assert set(np.round(tuned, 2)) <= set(default_grid())


def test_tuning_checks_shapes():
    with pytest.raises(ValueError, match="shapes"):
        tune_thresholds(np.zeros((3, 2)), np.zeros((3, 3), bool))
