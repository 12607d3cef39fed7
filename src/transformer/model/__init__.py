"""The model of "Attention Is All You Need", one idea per file."""

from transformer.model.attention import attention
from transformer.model.classifier import TransformerClassifier
from transformer.model.kv_cache import DecoderCache, KVCache
from transformer.model.masks import padding_mask, subsequent_mask
from transformer.model.multi_head_attention import MultiHeadAttention
from transformer.model.outputs import Attention, TransformerOutput
from transformer.model.positional_encoding import sinusoidal_table
from transformer.model.transformer import Transformer

__all__ = [
    "Attention",
    "DecoderCache",
    "KVCache",
    "MultiHeadAttention",
    "Transformer",
    "TransformerClassifier",
    "TransformerOutput",
    "attention",
    "padding_mask",
    "sinusoidal_table",
    "subsequent_mask",
]
