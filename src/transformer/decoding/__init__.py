"""Greedy and beam search decoding with the key/value cache."""
