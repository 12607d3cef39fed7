"""Losses, schedules, the Trainer, checkpoints and distributed training."""
