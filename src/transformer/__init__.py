"""transformer: "Attention Is All You Need" (Vaswani et al., 2017) as real software.

The package's names load on first use (:mod:`transformer.lazy_names`), so that a command that runs
no tensor (``transformer --help``, ``version``, decoding on CTranslate2) never imports PyTorch;
``from transformer import Transformer`` imports it then.
"""

from typing import TYPE_CHECKING

from transformer.lazy_names import lazy_names

if TYPE_CHECKING:
    from transformer.config import ModelConfig
    from transformer.model import Transformer, TransformerClassifier

__all__ = ["ModelConfig", "Transformer", "TransformerClassifier"]
__version__ = "0.1.0"
__getattr__, __dir__ = lazy_names(__name__, {"transformer.config": ("ModelConfig",),
                                             "transformer.model": ("Transformer", "TransformerClassifier")})
