"""Greedy and beam search decoding with the key/value cache."""

from transformer.decoding.beam import BeamState, beam_search
from transformer.decoding.greedy import greedy_decode

__all__ = ["BeamState", "beam_search", "greedy_decode"]
