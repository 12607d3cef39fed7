"""Greedy decoding, sampling and beam search, and their fast path (:class:`FastDecoder`)."""

from transformer.decoding.beam import BeamState, beam_search
from transformer.decoding.fast_decoder import FastDecoder
from transformer.decoding.greedy import greedy_decode, sample_decode
from transformer.decoding.hypothesis import Hypothesis

__all__ = ["BeamState", "FastDecoder", "Hypothesis", "beam_search", "greedy_decode", "sample_decode"]
