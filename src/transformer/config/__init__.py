"""Configuration: the model's shape (``ModelConfig``), one frozen dataclass per kind of run that
nests it, every preset and recipe, the one function that applies overrides, and the closed sets of
option values (``choices``)."""

from transformer.config.choices import ACTIVATIONS, POSITIONAL
from transformer.config.model import ModelConfig
from transformer.config.overrides import apply_overrides
from transformer.config.presets import (
    PRESETS,
    Preset,
    classifier_config,
    demo_config,
    get_preset,
    translation_config,
)
from transformer.config.runs import ClassifierTrainConfig, TranslationTrainConfig

__all__ = [
    "ACTIVATIONS", "POSITIONAL", "PRESETS", "ClassifierTrainConfig", "ModelConfig", "Preset",
    "TranslationTrainConfig", "apply_overrides", "classifier_config", "demo_config", "get_preset",
    "translation_config",
]
