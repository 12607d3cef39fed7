"""Two options through the options object: ``min_length`` (no EOS before N target tokens, a target
prefix counting) and ``forbid`` (token sequences no hypothesis contains), against their
definitions: Hugging Face's ``NoBadWordsLogitsProcessor`` for the ban itself, and every hypothesis
of greedy decoding, beam search and sampling for the searches."""

from __future__ import annotations

import pytest
import torch

from transformer.config.decoding import DecodeOptions
from transformer.decoding import beam_search, greedy_decode
from transformer.decoding.greedy import sample_decode
from transformer.decoding.guards import ban_sequences

PAD, BOS, EOS = 0, 2, 3


def contains(ids: list[int], sequence: list[int]) -> bool:
    n = len(sequence)
    return any(ids[i : i + n] == sequence for i in range(len(ids) - n + 1))


@pytest.mark.parametrize("length", [0, 1, 2, 5])
def test_the_ban_equals_hugging_face(length):
    transformers = pytest.importorskip("transformers")
    from transformers.generation.logits_process import NoBadWordsLogitsProcessor

    assert transformers
    g = torch.Generator().manual_seed(length)
    scores = torch.randn(6, 16, generator=g)
    history = torch.randint(4, 8, (6, length), generator=g)  # few tokens: the heads do match
    sequences = [[9], [4, 5], [5, 4, 6], [7, 7]]
    want = NoBadWordsLogitsProcessor(sequences, eos_token_id=EOS)(history, scores.clone())
    assert torch.equal(ban_sequences(scores, history, sequences), want)
    assert ban_sequences(scores, history, []) is scores


def _all_hypotheses(model, src, search: str, **kw) -> list[list[int]]:
    if search == "greedy":
        return greedy_decode(model, src, bos_id=BOS, eos_id=EOS, **kw)
    if search == "beam":  # every hypothesis the search keeps, not only the best
        return [ids for row in beam_search(model, src, bos_id=BOS, eos_id=EOS, beam_size=4, nbest=4,
                                           **kw) for ids, _ in row]
    return [h.ids for row in sample_decode(model, src, bos_id=BOS, eos_id=EOS, seed=3, samples=4,
                                           **kw) for h in row]


@pytest.mark.parametrize("search", ["greedy", "beam", "sampling"])
def test_a_forbidden_first_choice_changes_the_output_and_no_hypothesis_holds_it(copy_model, sources,
                                                                               search):
    """The copy model's own first two tokens of each output, forbidden: no hypothesis of any row
    contains one of them, and the outputs change."""
    src = sources(61, 10, min_len=3)
    plain = _all_hypotheses(copy_model, src, search, max_len=12)
    forbid = sorted({tuple(ids[:2]) for ids in plain if len(ids) >= 2})
    assert forbid, "the test needs outputs of two tokens or more"
    got = _all_hypotheses(copy_model, src, search, max_len=12, forbid=[list(s) for s in forbid])
    assert got != plain
    assert not any(contains(ids, list(s)) for ids in got for s in forbid)
    with_bos = _all_hypotheses(copy_model, src, search, max_len=12, forbid=[[BOS, *forbid[0][:1]]])
    assert not any(ids[:1] == list(forbid[0][:1]) for ids in with_bos)  # the history starts at BOS


@pytest.mark.parametrize("search", ["greedy", "beam", "sampling"])
def test_no_end_before_min_length_tokens(copy_model, sources, search):
    """Every hypothesis has at least N tokens before EOS, within a length rule that would stop it
    sooner (the limit is raised to hold N and EOS); a target prefix counts among the N."""
    src = sources(62, 10, min_len=2, max_len=5)
    rule = dict(max_len=20, max_len_a=1.0, max_len_b=1)  # 3 to 6 tokens
    plain = _all_hypotheses(copy_model, src, search, **rule)
    assert min(map(len, plain)) < 9, "the test needs outputs shorter than N"
    got = _all_hypotheses(copy_model, src, search, min_len=9, **rule)
    assert all(len(ids) >= 9 for ids in got)
    prefixes = [[5, 6, 7]] * src.size(0)
    with_prefix = _all_hypotheses(copy_model, src, search, min_len=9, prefixes=prefixes, **rule)
    assert all(len(ids) >= 9 and ids[:3] == [5, 6, 7] for ids in with_prefix)
    if search == "greedy":  # greedy stops as soon as it may: the prefix's tokens counted
        ended = greedy_decode(copy_model, src, bos_id=BOS, eos_id=EOS, min_len=9, prefixes=prefixes,
                              hypotheses=True, **rule)
        assert any(len(h.ids) == 9 and h.tokens == 9 - 3 + 1 for h in ended)


def test_min_length_is_checked_once_in_the_options(copy_model, sources):
    with pytest.raises(ValueError, match="min_length: 30 is above max_len 20"):
        DecodeOptions(min_length=30, max_len=20)
    with pytest.raises(ValueError, match="min_length: must be a non-negative integer"):
        greedy_decode(copy_model, sources(1, 2), bos_id=BOS, eos_id=EOS, min_len=-1)
    with pytest.raises(ValueError, match="min_length: 40 is above the 32 tokens this model decodes"):
        greedy_decode(copy_model, sources(1, 2), bos_id=BOS, eos_id=EOS, min_len=40)
    with pytest.raises(ValueError, match="forbid: a forbidden phrase is empty"):
        DecodeOptions(forbid=("Hund", " "))
