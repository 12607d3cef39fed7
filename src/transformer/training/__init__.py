"""Losses, schedules, the Trainer, checkpoints and distributed training, the same roles for both
tasks.

- ``loss``: label-smoothed cross-entropy that ignores padding (section 5.4).
- ``schedule``: every learning-rate schedule: the paper's warmup + inverse square root
  (equation 3), a peak-lr variant, constant, linear decay.
- ``optimizer``: Adam with beta2 = 0.98, eps = 1e-9 (section 5.3).
- ``task``: the ``Task`` protocol the Trainer asks; ``translation_task`` (``TranslationTask``:
  loss, greedy BLEU/chrF) and ``classification_task`` (``ClassificationTask``: loss, accuracy/F1,
  thresholds).
- ``trainer``: the loop: accumulation, mixed precision, evaluation, best model, early stopping,
  exact resume; ``loop_state``: its settings, counters and result; ``metrics_file``:
  ``metrics.jsonl``.
- ``checkpoint``: ``checkpoint/``, written atomically, read without unpickling; ``average``:
  checkpoint averaging.
- ``distributed``: DDP under ``torchrun`` (gloo on CPU, nccl on GPU).
- runs end to end: ``train_translation`` (``transformer train``), ``train_classifier``
  (``transformer classify train``), ``demo`` (``transformer demo``).
"""
