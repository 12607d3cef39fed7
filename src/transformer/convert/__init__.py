"""Converters between our model directory and other engines' formats.

- :mod:`transformer.convert.ctranslate2`: ours -> CTranslate2 (``TransformerSpec``, fp32 or int8).
"""

from transformer.convert.ctranslate2 import (
    ctranslate2_spec,
    export_ctranslate2,
    save_ctranslate2,
)

__all__ = ["ctranslate2_spec", "export_ctranslate2", "save_ctranslate2"]
