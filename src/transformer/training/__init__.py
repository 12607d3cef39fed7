"""Losses, schedules, the Trainer, checkpoints and distributed training.

- ``loss``: label-smoothed cross-entropy that ignores padding (section 5.4).
- ``schedule``: the paper's warmup + inverse square root (equation 3) and a peak-lr variant.
- ``optimizer``: Adam with beta2 = 0.98, eps = 1e-9 (section 5.3).
- ``task``: what the Trainer asks of a task; ``TranslationTask`` (loss, greedy BLEU/chrF).
- ``trainer``: the loop: accumulation, mixed precision, evaluation, best model, early stopping,
  exact resume, ``metrics.jsonl``.
- ``checkpoint``: the model directory (``save_model_dir``/``load_model_dir``) and ``checkpoint/``,
  written atomically, read without unpickling.
- ``distributed``: DDP under ``torchrun`` (gloo on CPU, nccl on GPU).
- ``translation``: ``transformer train`` end to end; ``demo``: ``transformer demo``.
- ``classification``, ``train_classifier``: the encoder-only classifier on the same Trainer.
"""
