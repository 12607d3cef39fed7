"""Token embeddings scaled by sqrt(d_model) (section 3.4), with positions and dropout.

Shapes: B batch, L length, D d_model, V vocabulary.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from transformer.model.positional_encoding import (
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
)


class TokenEmbedding(nn.Module):
    """ids (B, L) -> vectors (B, L, D), multiplied by sqrt(d_model) as the paper does.

    Initialised with std d_model^-0.5 so that the scaled embedding has unit scale, like the
    positional encoding it is added to; the padding row is zero.
    """

    def __init__(self, *, vocab_size: int, d_model: int, pad_id: int) -> None:
        super().__init__()
        self.scale = math.sqrt(d_model)
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        self.pad_id = pad_id
        nn.init.normal_(self.weight, std=d_model**-0.5)
        with torch.no_grad():
            self.weight[pad_id].zero_()

    def forward(self, tokens: Tensor) -> Tensor:
        return nn.functional.embedding(tokens, self.weight, self.pad_id) * self.scale  # (B, L, D)


class Embeddings(nn.Module):
    """The input of each stack: dropout(token embedding * sqrt(D) + positional encoding)."""

    def __init__(
        self, *, token: TokenEmbedding, d_model: int, max_len: int, positional: str, dropout: float,
        positional_layout: str = "interleaved",
    ) -> None:
        super().__init__()
        self.token = token
        if positional == "sinusoidal":
            self.position = SinusoidalPositionalEncoding(d_model=d_model, max_len=max_len,
                                                         layout=positional_layout)
        else:
            self.position = LearnedPositionalEncoding(d_model=d_model, max_len=max_len)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tokens: Tensor, *, offset: int = 0, prefix: Tensor | None = None) -> Tensor:
        """ids (B, L) at positions offset .. offset + L - 1 -> (B, L, D).

        ``prefix`` (B, P, D), e.g. a classifier's CLS vector, is put before the tokens' embeddings
        and takes the first P positions: the result is then (B, P + L, D).
        """
        x = self.token(tokens)  # (B, L, D)
        if prefix is not None:
            x = torch.cat([prefix.to(x.dtype), x], dim=1)  # (B, P + L, D)
        return self.dropout(self.position(x, offset=offset))

