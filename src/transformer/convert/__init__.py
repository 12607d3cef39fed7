"""Converters between our model directory and other engines' formats.

- :mod:`transformer.convert.ctranslate2`: ours -> CTranslate2 (``TransformerSpec``, fp32 or int8).
- :mod:`transformer.convert.marian`: a Hugging Face MarianMT (OPUS-MT) directory -> ours.
- :mod:`transformer.convert.huggingface`: ours -> a MarianMT directory (``from_pretrained``).
"""

from typing import TYPE_CHECKING

from transformer.lazy_names import lazy_names

if TYPE_CHECKING:
    from transformer.convert.ctranslate2 import (
        ctranslate2_spec,
        export_ctranslate2,
        save_ctranslate2,
    )
    from transformer.convert.huggingface import export_huggingface
    from transformer.convert.marian import import_marian

__all__ = ["ctranslate2_spec", "export_ctranslate2", "export_huggingface", "import_marian",
           "save_ctranslate2"]
__getattr__, __dir__ = lazy_names(__name__, {
    'transformer.convert.ctranslate2': ('ctranslate2_spec', 'export_ctranslate2', 'save_ctranslate2'),
    "transformer.convert.huggingface": ("export_huggingface",),
    "transformer.convert.marian": ("import_marian",),
})
