"""Configuration: the model's shape (``ModelConfig``) and the closed sets of option values."""

from transformer.config.choices import ACTIVATIONS, POSITIONAL
from transformer.config.model import ModelConfig

__all__ = ["ACTIVATIONS", "POSITIONAL", "ModelConfig"]
