"""transformer: "Attention Is All You Need" (Vaswani et al., 2017) as real software."""

from transformer.config import ModelConfig
from transformer.model import Transformer, TransformerClassifier

__all__ = ["ModelConfig", "Transformer", "TransformerClassifier"]
__version__ = "0.1.0"
