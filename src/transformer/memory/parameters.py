"""Parameter counts of this package's models, computed from the configuration alone.

Shapes: D d_model, F d_ff, V vocabulary, L layers.
"""

from __future__ import annotations

from transformer.config import ModelConfig
from transformer.config.field_error import ConfigError, Field


def _sublayer_parameters(config: ModelConfig) -> tuple[int, int]:
    """The Linear weights and biases of one attention sub-layer and of one feed-forward network."""
    d, f = config.d_model, config.d_ff
    attention = 4 * d * d + 4 * d  # fused Q/K/V (or Q and fused K/V) and W^O, with biases
    return attention, 2 * d * f + f + d


def _layer_parameters(config: ModelConfig) -> tuple[int, int]:
    """Parameters of one encoder layer and of one decoder layer (with their LayerNorms)."""
    attention, ffn = _sublayer_parameters(config)
    d = config.d_model
    return attention + ffn + 2 * 2 * d, 2 * attention + ffn + 3 * 2 * d


def parameter_count(
    config: ModelConfig,
    *,
    encoder_only: bool = False,
    num_labels: int = 2,
    pooling: str = "mean",
) -> int:
    """Distinct parameters of ``Transformer(config)`` or, with ``encoder_only``, of
    ``TransformerClassifier(config, num_labels=, pooling=)``; shared and tied tensors count once."""
    d = config.d_model
    enc_layer, dec_layer = _layer_parameters(config)
    learned = config.max_len * d if config.positional == "learned" else 0
    final_norm = 2 * d if config.norm_first else 0
    encoder = config.num_encoder_layers * enc_layer + final_norm
    if encoder_only:
        if num_labels < 1:
            raise ConfigError(Field("num_labels"), f" must be at least 1, got {num_labels}")
        cls = d if pooling == "cls" else 0
        return config.src_vocab_size * d + learned + cls + encoder + d * num_labels + num_labels
    if config.num_decoder_layers < 1:
        raise ConfigError("an encoder-decoder model needs ", Field("num_decoder_layers"), " >= 1")
    embeddings = config.src_vocab_size * d
    if not config.share_embeddings:
        embeddings += config.tgt_vocab_size * d
    output = config.tgt_vocab_size * (0 if config.tie_embeddings else d) + config.tgt_vocab_size
    decoder = config.num_decoder_layers * dec_layer + final_norm
    return embeddings + 2 * learned + encoder + decoder + output


def largest_parameter(config: ModelConfig, *, encoder_only: bool, num_labels: int) -> int:
    """Elements of the largest single parameter tensor (what Adam's per-parameter CPU update holds
    temporaries of)."""
    d = config.d_model
    sizes = [config.src_vocab_size * d, 3 * d * d, d * config.d_ff]
    if encoder_only:
        sizes.append(d * num_labels)
    else:
        sizes.append(config.tgt_vocab_size * d)
    return max(sizes)


def matmul_weights(config: ModelConfig, *, encoder_only: bool, num_labels: int) -> int:
    """Elements of the Linear weights and biases (autocast casts them to 16 bits)."""
    attention, ffn = _sublayer_parameters(config)
    d = config.d_model
    if encoder_only:
        return config.num_encoder_layers * (attention + ffn) + (d + 1) * num_labels
    return (config.num_encoder_layers * (attention + ffn)
            + config.num_decoder_layers * (2 * attention + ffn)
            + (d + 1) * config.tgt_vocab_size)
