"""Epochs of prepared pairs: without weights the batches of the in-memory path, with weights
each corpus's share within 2% of its weight, drawn anew each epoch."""

from __future__ import annotations

import numpy as np

from transformer.data.collation import collate_pairs
from transformer.data.encoding import EncodedPairs
from transformer.data.epoch_batches import Epochs
from transformer.data.prepared.mixing import MixedEpochs, mixture


def test_without_weights_the_epochs_are_those_of_the_in_memory_path(opened):
    data = opened()
    pairs = data.pairs("train", max_len=8, on_long="truncate")
    whole = data.pairs("train", max_len=10_000)
    # cut as encode_pairs cuts: the source to max_len, the target to max_len - 1 (BOS/EOS)
    assert [pairs[i] for i in range(len(pairs))] == [(s[:8], t[:7]) for s, t in whole]
    assert pairs.num_truncated == sum(len(s) > 8 or len(t) > 7 for s, t in whole) > 0
    assert pairs.lengths.tolist() == [[len(s), len(t)] for s, t in pairs]
    memory = EncodedPairs([pairs[i] for i in range(len(pairs))], max_len=8)
    assert all(max(len(s), len(t) + 1) <= 8 for s, t in memory)
    for rank in range(2):
        ours = MixedEpochs(pairs, weights=None, collate=collate_pairs, max_tokens=64, seed=2,
                           rank=rank, world_size=2)
        theirs = Epochs(memory, widths=memory.lengths, collate=collate_pairs, max_tokens=64, seed=2,
                        rank=rank, world_size=2)
        for epoch in (0, 1):
            a, b = ours.for_epoch(epoch), theirs.for_epoch(epoch)
            assert len(a) == len(b)
            for x, y in zip(a, b, strict=True):
                assert x.src.tolist() == y.src.tolist() and x.tgt_out.tolist() == y.tgt_out.tolist()


def test_weighted_mixing_lands_within_2_percent_of_the_weights(opened):
    data = opened(weights=[1, 3])
    pairs = data.pairs("train", max_len=32)
    sizes = pairs.sizes.tolist()
    assert sizes[0] > 2 * sizes[1]  # corpus b is the smaller: the weights turn the shares round
    epochs = MixedEpochs(pairs, weights=data.weights, collate=collate_pairs, max_tokens=64, seed=0)
    draws = []
    for epoch in range(3):
        indices, bounds = epochs.plan(epoch)
        share = np.bincount(pairs.corpus[indices], minlength=2) / len(indices)
        assert abs(share[1] - 0.75) < 0.02 and abs(share[0] - 0.25) < 0.02, share
        assert abs(len(indices) - len(pairs)) <= 1
        widths = pairs.widths[indices]
        assert all(int(widths[a:b].max()) * (b - a) <= 64 for a, b in zip(bounds[:-1], bounds[1:], strict=True))
        draws.append(np.sort(indices[pairs.corpus[indices] == 0]))
    assert not np.array_equal(draws[0], draws[1])  # the subsampled corpus draws anew each epoch
    np.testing.assert_array_equal(np.sort(epochs.plan(2)[0]), np.sort(epochs.plan(2)[0]))


def test_mixture_repeats_a_corpus_weighed_above_its_size():
    drawn = mixture([10, 4], [1, 1], seed=0, epoch=0)
    counts = np.bincount(drawn, minlength=14)
    assert len(drawn) == 14 and counts[:10].sum() == 7 and counts[10:].sum() == 7
    assert set(counts[10:].tolist()) <= {1, 2} and counts[:10].max() == 1
    assert mixture([10, 4], None, seed=0, epoch=0) is None
