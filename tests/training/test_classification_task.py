"""Classifier training through the shared Trainer: batching, losses, and tiny models that learn
"contains token k" rules (single-label and multi-label) in seconds."""

from __future__ import annotations

import functools
import random

import pytest
import torch
import torch.nn.functional as F

from transformer import ModelConfig, TransformerClassifier
from transformer.data.collation import collate_classification
from transformer.data.epoch_batches import Epochs
from transformer.evaluation.label_metrics import classification_report, decide, to_indicator
from transformer.inference.classifier import predict_logits, probabilities
from transformer.training.classification_task import ClassificationTask, classification_loss
from transformer.training.optimizer import build_optimizer
from transformer.training.schedule import LRSchedule, build_scheduler
from transformer.training.trainer import LoopConfig, Trainer

VOCAB, PAD = 24, 0


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run fastest on one thread, and the CI machine is shared."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def contains_rule(n: int, *, keys: tuple[int, ...], seed: int) -> tuple[list[list[int]], list[list[int]]]:
    """Random id sequences (ids 4..VOCAB-1, lengths 2..12) and the indices of the keys they hold.

    Each key is planted in about half of the sequences, so every label is balanced.
    """
    rng = random.Random(seed)
    others = [t for t in range(4, VOCAB) if t not in keys]
    ids, labels = [], []
    for _ in range(n):
        row = [rng.choice(others) for _ in range(rng.randint(2, 12))]
        for k in keys:
            if rng.random() < 0.5:
                row.insert(rng.randrange(len(row) + 1), k)
        ids.append(row)
        labels.append([c for c, k in enumerate(keys) if k in row])
    return ids, labels


def tiny_classifier(num_labels: int, *, multi_label: bool, pooling: str = "mean") -> TransformerClassifier:
    cfg = ModelConfig.tiny(VOCAB, d_model=32, num_heads=4, d_ff=64, num_encoder_layers=1,
                           num_decoder_layers=0, dropout=0.0, max_len=32)
    return TransformerClassifier(cfg, num_labels=num_labels, multi_label=multi_label, pooling=pooling)


def train(model, ids, labels, *, num_labels, multi_label, valid, steps=150):
    collate = functools.partial(collate_classification, num_labels=num_labels,
                                multi_label=multi_label, pad_id=PAD)
    data = Epochs(list(zip(ids, labels, strict=True)), widths=[max(len(r), 1) for r in ids],
                  collate=collate, max_tokens=512)
    task = ClassificationTask(num_labels=num_labels, multi_label=multi_label,
                              valid_ids=valid[0], valid_labels=valid[1])
    optimizer = build_optimizer(model)
    scheduler = build_scheduler(optimizer, schedule=LRSchedule(kind="inverse_sqrt", warmup=30, peak_lr=3e-3))
    best = {}

    def save_best(m, result):
        best.update(result, state={k: v.clone() for k, v in m.state_dict().items()})

    trainer = Trainer(model=model, task=task, optimizer=optimizer, scheduler=scheduler, train_data=data,
                      config=LoopConfig(max_steps=steps, eval_every=50, log_every=50), save_best=save_best)
    result = trainer.fit()
    return result, task, best


def test_single_label_learns_contains_token_k():
    torch.manual_seed(0)
    ids, _ = contains_rule(1200, keys=(7,), seed=0)
    labels = [[1] if 7 in row else [0] for row in ids]  # class 1: token 7 occurs
    test_ids, test_labels = contains_rule(400, keys=(7,), seed=1)
    test_labels = [[1] if 7 in row else [0] for row in test_ids]
    model = tiny_classifier(2, multi_label=False)
    result, _, best = train(model, ids, labels, num_labels=2, multi_label=False,
                            valid=(test_ids[:200], test_labels[:200]))
    assert result.best_metric >= 0.95
    model.load_state_dict(best["state"])
    probs = probabilities(predict_logits(model, test_ids[200:]), multi_label=False).numpy()
    report = classification_report(to_indicator(test_labels[200:], num_labels=2),
                                   decide(probs, multi_label=False))
    assert report.accuracy >= 0.95


def test_multi_label_learns_three_contains_rules_and_tunes_thresholds():
    torch.manual_seed(0)
    keys = (5, 9, 13)
    ids, labels = contains_rule(1500, keys=keys, seed=2)
    valid = contains_rule(300, keys=keys, seed=3)
    test_ids, test_labels = contains_rule(300, keys=keys, seed=4)
    model = tiny_classifier(3, multi_label=True)
    result, task, best = train(model, ids, labels, num_labels=3, multi_label=True, valid=valid)
    assert best["macro_f1"] >= best["macro_f1_at_0.5"]
    assert task.thresholds is not None and task.thresholds.shape == (3,)
    model.load_state_dict(best["state"])
    probs = probabilities(predict_logits(model, test_ids), multi_label=True).numpy()
    report = classification_report(to_indicator(test_labels, num_labels=3),
                                   decide(probs, multi_label=True, thresholds=task.thresholds))
    assert report.macro_f1 >= 0.95


def test_losses_equal_torch_references():
    logits = torch.randn(4, 3)
    labels = torch.tensor([0, 2, 1, 1])
    assert classification_loss(logits, labels, multi_label=False) == pytest.approx(
        float(F.cross_entropy(logits, labels)) * 4, rel=1e-6)
    target = torch.tensor([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0]], dtype=torch.float)
    manual = -(target * F.logsigmoid(logits) + (1 - target) * F.logsigmoid(-logits)).sum()
    assert classification_loss(logits, target, multi_label=True) == pytest.approx(float(manual), rel=1e-5)
    weight = torch.tensor([1.0, 2.0, 3.0])
    manual_w = -(weight * target * F.logsigmoid(logits) + (1 - target) * F.logsigmoid(-logits)).sum()
    assert classification_loss(logits, target, multi_label=True, pos_weight=weight) == pytest.approx(
        float(manual_w), rel=1e-5)
