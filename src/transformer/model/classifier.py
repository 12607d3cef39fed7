"""The encoder alone as a text classifier: embeddings, encoder stack, pooling, dropout, linear head.

Shapes: B batch, S length, D d_model, C labels.

Single-label models are trained with softmax cross-entropy and multi-label ones with
BCEWithLogits (one independent sigmoid per label); the model itself returns logits only.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from transformer.config import ModelConfig
from transformer.model.embedding import TokenEmbedding
from transformer.model.masks import padding_mask
from transformer.model.outputs import Attention, TransformerOutput
from transformer.model.transformer import (
    build_embeddings,
    build_encoder,
    count_parameters,
    init_linear_,
)

POOLING = ("mean", "cls")


class TransformerClassifier(nn.Module):
    """``model(tokens)`` with tokens (B, S) -> logits (B, C).

    ``pooling="mean"`` averages the encoder output over non-padding tokens; ``"cls"`` prepends a
    learned vector (it takes position 0, so inputs may hold ``max_len - 1`` tokens) and reads its
    output. The source side of ``config`` is used; decoder fields are ignored.
    """

    def __init__(
        self,
        config: ModelConfig,
        *,
        num_labels: int,
        pooling: str = "mean",
        multi_label: bool = False,
    ) -> None:
        super().__init__()
        if num_labels < 1:
            raise ValueError(f"num_labels must be at least 1, got {num_labels}")
        if pooling not in POOLING:
            raise ValueError(f"pooling must be one of {POOLING}, got {pooling!r}")
        self.config = config
        self.num_labels = num_labels
        self.pooling = pooling
        self.multi_label = multi_label
        token = TokenEmbedding(
            vocab_size=config.src_vocab_size, d_model=config.d_model, pad_id=config.pad_id
        )
        self.embed = build_embeddings(config, token)
        self.cls = nn.Parameter(torch.randn(1, 1, config.d_model) * 0.02) if pooling == "cls" else None
        self.encoder = build_encoder(config)
        self.dropout = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.d_model, num_labels)
        init_linear_(self.encoder)
        init_linear_(self.head)

    @property
    def max_tokens(self) -> int:
        """The longest input (in tokens) the model accepts."""
        return self.config.max_len - (1 if self.pooling == "cls" else 0)

    def num_parameters(self, *, trainable_only: bool = False) -> int:
        return count_parameters(self, trainable_only=trainable_only)

    def forward(
        self, tokens: Tensor, *, return_attention: bool = False
    ) -> Tensor | TransformerOutput:
        """``tokens`` (B, S) -> logits (B, C); with ``return_attention`` a TransformerOutput whose
        ``attention.encoder`` holds one (B, H, S', S') per layer (S' = S + 1 with a CLS vector)."""
        keep = padding_mask(tokens, self.config.pad_id)  # (B, 1, 1, S)
        prefix = None
        if self.cls is not None:
            prefix = self.cls.expand(tokens.size(0), 1, -1)  # (B, 1, D)
            keep = torch.cat([keep.new_ones(tokens.size(0), 1, 1, 1), keep], dim=-1)  # (B, 1, 1, S+1)
        x = self.embed(tokens, prefix=prefix)  # (B, S', D)
        x, weights = self.encoder(x, mask=keep, need_weights=return_attention)
        if self.cls is not None:
            pooled = x[:, 0]  # (B, D)
        else:
            valid = keep[:, 0, 0, :, None].to(x.dtype)  # (B, S, 1)
            pooled = (x * valid).sum(1) / valid.sum(1).clamp(min=1.0)  # (B, D); all-pad row -> 0
        logits = self.head(self.dropout(pooled))  # (B, C)
        if return_attention:
            return TransformerOutput(logits, Attention(encoder=weights))
        return logits
