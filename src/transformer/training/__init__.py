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
  exact resume; ``loop_state``: its settings, counters and result; ``budget``: the share of
  the budget used, the stop reason, the eta; ``model_selection``: which evaluation's model is
  kept; ``train_log``: log lines, progress bar and the records of ``metrics_file``
  (``metrics.jsonl``).
- ``checkpoint``: the files (``checkpoint/``, ``snapshots/``), written atomically, read without
  unpickling; ``exact_resume``: what the Trainer saves in them and restores; ``rng``: seeding and
  the random generators' state; ``average``: checkpoint averaging.
- ``distributed``: DDP under ``torchrun`` (gloo on CPU, nccl on GPU).
- around a run: ``run_lock`` (one run per directory), ``preemption`` (SIGTERM and SIGINT),
  ``reproducibility`` (threads and machine kind), ``init_from`` (starting from a model
  directory's weights), ``run_lifecycle`` (start, refuse or overwrite, resume and ``--resume
  auto``, the same for both tasks).
- runs end to end, each a recipe of named stages: ``train_translation`` (``transformer train``;
  its tokenizers and model: ``translation_setup``, its data, chosen once: ``text_inputs`` or
  ``data_dir_inputs``), ``train_classifier`` (``transformer classify train``; its data:
  ``classifier_inputs``), the stages both share (``stages``: precision, optimizer, training, the
  summary), ``demo`` (``transformer demo``).
"""
