"""A decoding session: what greedy decoding and beam search step through.

Shapes: N sentences, R rows being decoded (hypotheses), T prefix length, S source length,
V target vocabulary.

A session is opened on a batch of sources and then, each step, gives the next-token logits of
every row and follows the search's choice of rows. Two kinds: the fast path
(:class:`~transformer.decoding.fast_decoder.FastSession`, for a ``Transformer`` with the cache),
and :class:`ReferenceSession`, which goes through ``model.encode``/``model.decode`` (any
:class:`~transformer.decoding.session.Seq2SeqModel`), with the model's own cache or recomputing
the whole prefix every step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol

from torch import Tensor, nn

from transformer.decoding.fast_decoder import FastDecoder, decoder_for
from transformer.model.kv_cache import DecoderCache


class Seq2SeqModel(Protocol):
    """What the reference decoding (:class:`~transformer.decoding.session.ReferenceSession`) needs
    from a model (``transformer.Transformer`` has it): one row of ``memory`` and ``src`` per row of
    ``tgt_in``, and a cache that ``DecoderCache.reorder`` follows the chosen rows in."""

    config: object  # with .pad_id and .max_len

    def encode(self, src: Tensor) -> Tensor: ...

    def decode(
        self, tgt_in: Tensor, memory: Tensor | None, src: Tensor, *, cache: DecoderCache | None = None
    ) -> Tensor: ...

    def new_cache(self) -> DecoderCache: ...


@contextlib.contextmanager
def evaluation_mode(model: nn.Module) -> Iterator[None]:
    """Dropout off while decoding (it would make the search random); each module's mode is
    restored after. Only modules in training mode are switched: a model already in evaluation
    mode (every call of a translator) costs one walk over its modules, not two calls of
    ``train()``, which would set every module's mode twice (a millisecond at batch 1)."""
    training = [m for m in model.modules() if m.training]
    for module in training:
        module.training = False
    try:
        yield
    finally:
        for module in training:
            module.training = True


class Session(Protocol):
    needs_prefix: bool  # True: step() takes the whole prefix (R, T); False: the newest token (R, 1)

    def step(self, tokens: Tensor) -> Tensor:
        """Next-token logits (R, V) of every row."""
        ...

    def select(self, index: Tensor, *, keep: Tensor | None, beams: int) -> None:
        """Go on with rows ``index`` (R',) of the last step, ``beams`` consecutive rows per
        sentence; ``keep`` (N'): the sentences that stay (None: all of them, in order)."""
        ...


class ReferenceSession:
    """Decoding through the model's ``encode`` and ``decode``, one memory row per row decoded:
    with ``use_cache``, the model's own cache; without, the whole prefix every step."""

    def __init__(self, model: Seq2SeqModel, src: Tensor, *, use_cache: bool) -> None:
        self.model = model
        self.src = src  # (R, S)
        self.memory: Tensor | None = model.encode(src)  # (R, S, D)
        self.cache = model.new_cache() if use_cache else None
        self.needs_prefix = not use_cache

    def step(self, tokens: Tensor) -> Tensor:
        logits = self.model.decode(tokens, self.memory, self.src, cache=self.cache)  # (R, T, V)
        if self.cache is not None:
            self.memory = None  # the cross-attention caches hold it now
        return logits[:, -1]

    def select(self, index: Tensor, *, keep: Tensor | None, beams: int) -> None:
        self.src = self.src[index]
        if self.cache is not None:
            self.cache.reorder(index)
        else:
            assert self.memory is not None
            self.memory = self.memory[index]


def open_session(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    use_cache: bool,
    pack_weights: bool,
    decoder: FastDecoder | None,
    precision: str = "fp32",
) -> Session:
    """The session that decodes ``src`` (N, S): ``decoder``'s (it must be built from ``model``) or
    a new :class:`FastDecoder`'s for a ``Transformer`` with the cache, else the reference.
    ``precision="int8"`` needs the fast path (the cache and a ``Transformer``). A model that opens
    its own sessions (an ``open_session`` method: :class:`~transformer.decoding.ensemble.Ensemble`)
    is asked for one, and takes no ``decoder``."""
    own = getattr(model, "open_session", None)
    if callable(own):
        if decoder is not None:
            raise ValueError(f"decoder=: a {type(model).__name__} keeps its own decoders")
        return own(src, use_cache=use_cache, pack_weights=pack_weights, precision=precision)
    if decoder is not None and decoder.model is not model:
        raise ValueError("decoder= was built from another model than the one being decoded")
    if decoder is not None and precision == "int8" and decoder.precision != "int8":
        raise ValueError("precision='int8' but decoder= was built for "
                         f"{decoder.precision!r}; build it with FastDecoder(model, precision='int8')")
    if precision == "int8" and not use_cache:
        raise ValueError("int8 decoding runs with the key/value cache (use_cache=True)")
    if use_cache and decoder is None:
        decoder = decoder_for(model, pack_weights=pack_weights, precision=precision)  # type: ignore[arg-type]
    if use_cache and decoder is not None:
        return decoder.start(src)
    return ReferenceSession(model, src, use_cache=use_cache)
