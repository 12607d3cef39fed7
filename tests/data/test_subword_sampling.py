"""Subword sampling: sampled encodings repeat with their seed in any process, decode back to the
text, follow ``p ** alpha``, and are made anew each epoch of the training side only."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

import pytest

from transformer.data.builtin_task import english_number
from transformer.data.sampled_epochs import SampledEpochs, epoch_seed
from transformer.data.tokenizer import Tokenizer

TEXTS = [english_number(n) for n in range(1, 300)]


@pytest.fixture(scope="module")
def tok():
    return Tokenizer.train(TEXTS, vocab_size=60, byte_fallback=False, model_type="unigram")


def test_a_seed_repeats_its_encodings_in_any_process(tok, tmp_path):
    first = tok.sample_batch(TEXTS, alpha=0.1, seed=3)
    assert tok.sample_batch(TEXTS, alpha=0.1, seed=4) != first
    assert Tokenizer.from_bytes(tok.to_bytes()).sample_batch(TEXTS, alpha=0.1, seed=3) == first
    assert first != tok.encode_batch(TEXTS)  # it samples
    assert [tok.decode(ids) for ids in first] == [tok.decode(ids) for ids in tok.encode_batch(TEXTS)]
    (tmp_path / "model").write_bytes(tok.to_bytes())
    code = ("import sys; from transformer.data.tokenizer import Tokenizer; "
            "from transformer.data.builtin_task import english_number; "
            f"t = Tokenizer.load({str(tmp_path / 'model')!r}); "
            "print(t.sample_batch([english_number(n) for n in range(1, 300)], alpha=0.1, seed=3))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == str(first)


def test_draws_follow_the_smoothed_model_probabilities(tok):
    """One word, many draws: each segmentation's share is p(segmentation) ** alpha normalised
    over the word's best segmentations (within sampling error)."""
    import math

    sampler_word = "seventy"
    draws = Counter(tuple(tok.sample_batch([sampler_word], alpha=0.5, seed=s)[0]) for s in range(3000))
    segmentations = [tuple(s) for s in tok._sp.nbest_encode_as_ids(sampler_word, nbest_size=32)]
    scores = [sum(tok._sp.get_score(i) for i in s) for s in segmentations]
    weights = [math.exp(0.5 * (x - max(scores))) for x in scores]
    for seg, w in zip(segmentations, weights, strict=True):
        assert draws[seg] / 3000 == pytest.approx(w / sum(weights), abs=0.03)
    assert set(draws) <= set(segmentations)


def test_bpe_is_refused():
    bpe = Tokenizer.train(TEXTS, vocab_size=60, byte_fallback=False, model_type="bpe")
    with pytest.raises(ValueError, match="this one is bpe"):
        bpe.sample_batch(TEXTS, alpha=0.1, seed=0)


def test_each_epoch_encodes_anew_and_repeats_when_asked_again(tok):
    calls = []

    def encode(seed):
        calls.append(seed)
        items = tok.sample_batch(TEXTS, alpha=0.1, seed=seed)
        return items, [len(i) + 1 for i in items], max(len(i) + 1 for i in items)

    def batches(data, epoch):
        return [list(map(tuple, b)) for b in data.for_epoch(epoch)]

    data = SampledEpochs(encode, collate=lambda items: items, max_tokens=64, seed=7)
    one, two = batches(data, 1), batches(data, 2)
    assert calls == [epoch_seed(7, 1), epoch_seed(7, 2)]
    assert one != two
    again = SampledEpochs(encode, collate=lambda items: items, max_tokens=64, seed=7)
    assert batches(again, 2) == two and batches(again, 1) == one  # a resumed run's epochs
    assert batches(again, 1) == one and len(calls) == 4  # the last epoch's encodings are kept
    assert epoch_seed(7, 1) != epoch_seed(8, 1)


@pytest.mark.parametrize(("fields", "words"), [
    ({"subword_sampling": -0.1}, "subword_sampling must be 0 (off) or positive, got -0.1"),
    ({"subword_sampling": 0.1, "model_type": "bpe"}, "segmentations; this run's is bpe"),
    ({"subword_sampling": 0.1, "model_type": "unigram", "data": None, "data_dir": "d"},
     "a prepared data_dir holds its pairs encoded once"),
])
def test_bad_values_are_named(fields, words):
    from transformer.config.field_error import ConfigError
    from transformer.config.runs import TranslationTrainConfig

    with pytest.raises(ConfigError, match=re.escape(words)):
        TranslationTrainConfig(**{"data": "multi30k", "max_steps": 1, **fields})
