"""Greedy decoding, sampling and beam search, and their fast path (:class:`FastDecoder`)."""

from typing import TYPE_CHECKING

from transformer.lazy_names import lazy_names

if TYPE_CHECKING:
    from transformer.decoding.beam import BeamState, beam_search
    from transformer.decoding.ensemble import Ensemble
    from transformer.decoding.fast_decoder import FastDecoder
    from transformer.decoding.greedy import greedy_decode, sample_decode
    from transformer.decoding.hypothesis import Hypothesis

__all__ = ["BeamState", "Ensemble", "FastDecoder", "Hypothesis", "beam_search", "greedy_decode", "sample_decode"]
__getattr__, __dir__ = lazy_names(__name__, {
    "transformer.decoding.beam": ("BeamState", "beam_search"),
    "transformer.decoding.ensemble": ("Ensemble",),
    "transformer.decoding.fast_decoder": ("FastDecoder",),
    "transformer.decoding.greedy": ("greedy_decode", "sample_decode"),
    "transformer.decoding.hypothesis": ("Hypothesis",),
})
