"""The seed tutorial's training-memory formula for a decoder-only (GPT-2) model.

The seed tutorial (Trenton Bricken's GPT-2 calculator, 2022) estimates a training step as

    total = 4 * parameters + 2 * activations     (values, times 4 bytes in float32)

where "4 * parameters" is the weights, their gradients and Adam's two moments, and "2 *
activations" is the tensors saved for the backward pass plus as much again for their gradients.
With GPT-2 small's settings it gives the seed's 26.68 GB (the 27.5 GB quoted beside it is Hugging
Face's measured figure). :func:`transformer.memory.estimate_training_memory` is the careful
version for this package's models.

Shapes: B batch, T sequence length, D d_model, F d_ff, H heads, V vocabulary, L layers.
"""

from __future__ import annotations

from transformer.config.field_error import ConfigError, Field
from transformer.memory.estimate import MemoryEstimate, MemoryLine
from transformer.memory.setting import FP32


def seed_formula_estimate(
    *,
    num_layers: int,
    num_heads: int,
    d_model: int,
    vocab_size: int,
    batch_size: int,
    seq_len: int,
    d_ff: int | None = None,
    bytes_per_value: int = FP32,
) -> MemoryEstimate:
    """The seed's decoder-only (GPT-2) estimate, kept term for term so it reproduces its example.

        parameters  = V*D + L*(4*D^2 + 2*D*F + 4*D)             (F = 4*D in GPT-2)
        activations = B*T*(2*V + L*(6*D + 2*F + H*T))            (14*D + H*T per layer when F = 4*D)
        total       = (parameters + gradients + 2 Adam moments) + (activations + their gradients)

    GPT-2 small (L=12, H=12, D=768, V=50257, B=8, T=1024) gives 26,683,781,120 bytes = 26.68 GB.
    It ignores biases, LayerNorms and position embeddings in the parameters, and counts every
    activation gradient as alive at once; :func:`estimate_training_memory` is the careful version
    for this package's models.
    """
    for name, value in (("num_layers", num_layers), ("num_heads", num_heads), ("d_model", d_model),
                        ("vocab_size", vocab_size), ("batch_size", batch_size), ("seq_len", seq_len),
                        ("bytes_per_value", bytes_per_value)):
        if value < 1:
            raise ConfigError(Field(name), f" must be positive, got {value}")
    f = 4 * d_model if d_ff is None else d_ff
    if f < 1:
        raise ConfigError(Field("d_ff"), f" must be positive, got {d_ff}")
    d, v, n_layers, b, t = d_model, vocab_size, num_layers, batch_size, seq_len
    params = v * d + n_layers * (4 * d * d + 2 * d * f + 4 * d)
    acts = b * t * (2 * v + n_layers * (6 * d + 2 * f + num_heads * t))
    lines = (
        MemoryLine("parameters", params * bytes_per_value, f"{params:,} values"),
        MemoryLine("gradients", params * bytes_per_value, "one per parameter"),
        MemoryLine("optimizer state", 2 * params * bytes_per_value, "Adam: 2 moments per parameter"),
        MemoryLine("activations", acts * bytes_per_value,
                   f"B*T*(2V + L*(6D + 2F + H*T)) = {acts:,} values"),
        MemoryLine("activation gradients", acts * bytes_per_value, "as many as activations"),
    )
    total = sum(x.bytes for x in lines)
    setting = dict(model="decoder-only (seed formula)", num_layers=n_layers, num_heads=num_heads,
                   d_model=d, d_ff=f, vocab_size=v, batch_size=b, seq_len=t,
                   bytes_per_value=bytes_per_value)
    return MemoryEstimate(lines, total, "the seed's formula: every line at once",
                          tuple(x.name for x in lines), params, setting)
