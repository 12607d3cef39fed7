"""The translation pipeline's pieces: its configuration and its per-epoch batch order."""

from __future__ import annotations

import json

import pytest
import torch

from transformer.data.batching import EncodedPairs
from transformer.training.translation import PairEpochs, TranslationTrainConfig


def test_config_round_trips_through_json():
    cfg = TranslationTrainConfig(data="numbers", model={"d_model": 32}, max_steps=10,
                                 adam_betas=(0.8, 0.9))
    again = TranslationTrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg
    assert cfg.loop_config().max_steps == 10


@pytest.mark.parametrize("kwargs", [
    {"data": None},  # neither a corpus nor files
    {"data": "wmt14"},
    {"valid_src": "a.en"},  # without valid_tgt
    {"schedule": "cosine"},
    {"max_steps": None},  # no stop condition at all
    {"metric": "rouge"},
    {"on_long": "wrap"},
    {"model_type": "wordpiece"},
])
def test_bad_configurations(kwargs):
    with pytest.raises(ValueError):
        TranslationTrainConfig(**{"data": "numbers", "max_steps": 5, **kwargs})


def test_unknown_fields_in_a_stored_config():
    with pytest.raises(ValueError, match="unknown training fields"):
        TranslationTrainConfig.from_dict({"data": "numbers", "max_steps": 1, "speed": "fast"})


def test_epochs_are_deterministic_shards_of_the_same_order(synth):
    pairs = EncodedPairs(synth.make_pairs(60, seed=1), max_len=16)
    data = PairEpochs(pairs, max_tokens=40, seed=3)
    first, again, second = data.for_epoch(0), data.for_epoch(0), data.for_epoch(1)
    assert len(first) == len(data) > 1
    assert all(torch.equal(a.src, b.src) for a, b in zip(first, again, strict=True))
    assert any(not torch.equal(a.src, b.src) or a.src.shape != b.src.shape
               for a, b in zip(first, second, strict=True))
    assert [b.src.tolist() for b in first[2:4]] == [first[2].src.tolist(), first[3].src.tolist()]
    # two ranks see disjoint halves of the same epoch, together every pair once
    shards = [PairEpochs(pairs, max_tokens=40, seed=3, rank=r, world_size=2).for_epoch(0)
              for r in range(2)]
    assert len(shards[0]) == len(shards[1])
    seen = sorted(n for shard in shards for b in shard for n in (b.src != 0).sum(1).tolist())
    assert seen == sorted(len(s) for s, _ in pairs)
