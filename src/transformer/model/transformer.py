"""The encoder-decoder Transformer (Figure 1 of the paper).

Shapes: B batch, S source length, T target length, D d_model, H heads, V target vocabulary.
"""

from __future__ import annotations

from torch import Tensor, nn

from transformer.config import ModelConfig
from transformer.model.decoder import Decoder, DecoderLayer
from transformer.model.embedding import Embeddings, TokenEmbedding
from transformer.model.encoder import Encoder, EncoderLayer
from transformer.model.kv_cache import DecoderCache
from transformer.model.masks import padding_mask, subsequent_mask
from transformer.model.outputs import Attention, TransformerOutput


def layer_kwargs(config: ModelConfig) -> dict:
    """The constructor arguments that encoder and decoder layers share."""
    return dict(
        d_model=config.d_model,
        num_heads=config.num_heads,
        d_ff=config.d_ff,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation_dropout=config.activation_dropout,
        activation=config.activation,
        norm_first=config.norm_first,
        layer_norm_eps=config.layer_norm_eps,
    )


def build_encoder(config: ModelConfig) -> Encoder:
    final_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None
    layers = [EncoderLayer(**layer_kwargs(config)) for _ in range(config.num_encoder_layers)]
    return Encoder(layers, final_norm=final_norm)


def build_embeddings(config: ModelConfig, token: TokenEmbedding) -> Embeddings:
    return Embeddings(
        token=token,
        d_model=config.d_model,
        max_len=config.max_len,
        positional=config.positional,
        positional_layout=config.positional_layout,
        dropout=config.dropout,
    )


def init_linear_(module: nn.Module) -> None:
    """Xavier-uniform weights and zero biases for every Linear (as torch.nn.Transformer does)."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def count_parameters(module: nn.Module, *, trainable_only: bool = False) -> int:
    """Number of distinct parameters; a tied or shared tensor counts once."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


class Transformer(nn.Module):
    """Encoder-decoder Transformer: ``model(src, tgt_in)`` -> logits (B, T, V).

    ``src`` (B, S) and ``tgt_in`` (B, T) are token ids padded with ``config.pad_id``. Padding is
    masked out of every attention, so it never changes a non-padding output.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if config.num_decoder_layers < 1:
            raise ValueError("a Transformer needs num_decoder_layers >= 1")
        self.config = config
        src_token = TokenEmbedding(
            vocab_size=config.src_vocab_size, d_model=config.d_model, pad_id=config.pad_id
        )
        tgt_token = (
            src_token
            if config.share_embeddings
            else TokenEmbedding(
                vocab_size=config.tgt_vocab_size, d_model=config.d_model, pad_id=config.pad_id
            )
        )
        self.src_embed = build_embeddings(config, src_token)
        self.tgt_embed = build_embeddings(config, tgt_token)
        self.encoder = build_encoder(config)
        final_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None
        self.decoder = Decoder(
            [DecoderLayer(**layer_kwargs(config)) for _ in range(config.num_decoder_layers)],
            final_norm=final_norm,
        )
        self.output_projection = nn.Linear(config.d_model, config.tgt_vocab_size)
        init_linear_(self.encoder)
        init_linear_(self.decoder)
        init_linear_(self.output_projection)
        if config.tie_embeddings:  # section 3.4: pre-softmax projection = target embedding
            self.output_projection.weight = tgt_token.weight

    def num_parameters(self, *, trainable_only: bool = False) -> int:
        """Distinct parameters (shared and tied tensors count once), as the paper's Table 3 counts."""
        return count_parameters(self, trainable_only=trainable_only)

    def new_cache(self) -> DecoderCache:
        """An empty key/value cache for incremental decoding with :meth:`decode`."""
        return DecoderCache.empty(self.config.num_decoder_layers)

    def _encode(self, src: Tensor, need_weights: bool) -> tuple[Tensor, list[Tensor]]:
        x = self.src_embed(src)  # (B, S, D)
        return self.encoder(x, mask=padding_mask(src, self.config.pad_id), need_weights=need_weights)

    def encode(self, src: Tensor) -> Tensor:
        """Source ids (B, S) -> memory (B, S, D)."""
        memory, _ = self._encode(src, need_weights=False)
        return memory

    def _decode(
        self,
        tgt_in: Tensor,
        memory: Tensor | None,
        src: Tensor,
        cache: DecoderCache | None,
        need_weights: bool,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        offset = cache.length if cache is not None else 0
        t = tgt_in.size(1)
        if cache is None:
            # causal and target padding: (T, T) & (B, 1, 1, T) -> (B, 1, T, T)
            self_mask = subsequent_mask(t, device=tgt_in.device) & padding_mask(tgt_in, self.config.pad_id)
        elif t > 1:
            self_mask = subsequent_mask(t, offset=offset, device=tgt_in.device)  # (T, offset + T)
        else:
            self_mask = None  # one new position may attend every cached one
        x = self.tgt_embed(tgt_in, offset=offset)  # (B, T, D)
        x, self_w, cross_w = self.decoder(
            x,
            memory,
            self_mask=self_mask,
            memory_mask=padding_mask(src, self.config.pad_id),  # (B, 1, 1, S)
            cache=cache,
            need_weights=need_weights,
        )
        return self.output_projection(x), self_w, cross_w  # (B, T, V)

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor | None,
        src: Tensor,
        *,
        cache: DecoderCache | None = None,
        return_attention: bool = False,
    ) -> Tensor | TransformerOutput:
        """Target ids (B, T) and encoder ``memory`` (B, S, D) -> logits (B, T, V).

        ``src`` (B, S) gives the source padding mask. With a ``cache``
        (from :meth:`new_cache`), ``tgt_in`` holds only the new positions; the cache is extended in
        place, and cross-attention keys/values are computed from ``memory`` on the first call only
        (``memory`` may be None afterwards).
        """
        logits, self_w, cross_w = self._decode(tgt_in, memory, src, cache, return_attention)
        if return_attention:
            return TransformerOutput(logits, Attention(decoder=self_w, cross=cross_w))
        return logits

    def forward(
        self, src: Tensor, tgt_in: Tensor, *, return_attention: bool = False
    ) -> Tensor | TransformerOutput:
        """Teacher-forced pass: ``src`` (B, S), ``tgt_in`` (B, T) -> logits (B, T, V).

        With ``return_attention`` it returns a :class:`TransformerOutput` whose ``attention`` holds
        encoder (B, H, S, S), decoder (B, H, T, T) and cross (B, H, T, S) weights per layer.
        """
        memory, enc_w = self._encode(src, need_weights=return_attention)
        logits, self_w, cross_w = self._decode(tgt_in, memory, src, None, return_attention)
        if return_attention:
            return TransformerOutput(logits, Attention(encoder=enc_w, decoder=self_w, cross=cross_w))
        return logits
