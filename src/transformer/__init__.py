"""transformer: "Attention Is All You Need" (Vaswani et al., 2017) as real software."""

import gc as _gc

# importing PyTorch makes about 170,000 objects that live as long as the process: collecting
# garbage among them as they come (some 400 collections) costs about 0.1 s, so the collector
# waits until the imports are done (and stays off if it was off)
_collecting = _gc.isenabled()
_gc.disable()
try:
    from transformer.config import ModelConfig
    from transformer.model import Transformer, TransformerClassifier
finally:
    if _collecting:
        _gc.enable()

__all__ = ["ModelConfig", "Transformer", "TransformerClassifier"]
__version__ = "0.1.0"
