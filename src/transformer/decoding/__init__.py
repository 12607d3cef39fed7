"""Greedy and beam search decoding, and their fast path (:class:`FastDecoder`)."""

from transformer.decoding.beam import BeamState, beam_search
from transformer.decoding.fast_decoder import FastDecoder
from transformer.decoding.greedy import greedy_decode

__all__ = ["BeamState", "FastDecoder", "beam_search", "greedy_decode"]
