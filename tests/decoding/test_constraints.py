"""Lexically constrained beam search (dynamic beam allocation): every phrase appears in every
output; sentences without phrases decode exactly as plain beam search, alone or batched with
constrained ones; the fast path (packed, int8) equals the reference; a phrase left half-way
resets."""

from __future__ import annotations

import random

import pytest
import torch

from transformer.decoding import beam_search
from transformer.decoding.constraints import Constraints

PAD, BOS, EOS = 0, 2, 3


def contains(ids: list[int], phrase: list[int]) -> bool:
    return any(ids[i : i + len(phrase)] == phrase for i in range(len(ids) - len(phrase) + 1))


def random_constraints(src: torch.Tensor, seed: int, *, words: range) -> list[list[list[int]]]:
    """0 to 2 phrases of 1 to 3 random words per row; some rows have none."""
    rng = random.Random(seed)
    return [[[rng.choice(words) for _ in range(rng.randint(1, 3))] for _ in range(rng.randint(0, 2))]
            for _ in range(src.size(0))]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("beam", [1, 2, 4])
def test_every_phrase_appears_in_every_output(copy_model, sources, seed, beam):
    src = sources(seed, 12, min_len=2)
    phrases = random_constraints(src, seed, words=range(4, copy_model.config.tgt_vocab_size))
    found = beam_search(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=16, beam_size=beam,
                        constraints=phrases, hypotheses=True)
    for row, wanted in zip(found, phrases, strict=True):
        best = row[0]
        assert best.tokens == len(best.ids) + 1, "a constrained output must end with EOS, not at the limit"
        for phrase in wanted:
            assert contains(best.ids, phrase), (best.ids, phrase)


def test_no_constraints_is_plain_beam_search_token_for_token(copy_model, sources):
    src = sources(1, 24, min_len=2)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=14, beam_size=4, nbest=3)
    plain = beam_search(copy_model, src, **kw)
    assert beam_search(copy_model, src, constraints=[[] for _ in range(24)], **kw) == plain
    # a batch mixing rows with phrases and rows without: the latter as plain, scores too
    phrases = [[[5, 6]] if i % 3 == 0 else [] for i in range(24)]
    mixed = beam_search(copy_model, src, constraints=phrases, **kw)
    for i, (got, want) in enumerate(zip(mixed, plain, strict=True)):
        if not phrases[i]:
            assert [ids for ids, _ in got] == [ids for ids, _ in want]
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)
        else:
            assert all(contains(ids, [5, 6]) for ids, _ in got)
    assert sum(got != want for got, want in zip(mixed, plain, strict=True)) >= 3


@pytest.mark.parametrize("fast", [dict(use_cache=False), dict(use_cache=True, pack_weights=False),
                                  dict(use_cache=True, precision="int8"),
                                  dict(use_cache=True, precision="bf16")])
def test_fast_path_equals_reference(copy_model, sources, fast, fast_kernels_from_one_row):
    src = sources(2, 10, min_len=2)
    phrases = random_constraints(src, 3, words=range(4, copy_model.config.tgt_vocab_size))
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=14, beam_size=3, constraints=phrases, hypotheses=True)
    packed = beam_search(copy_model, src, use_cache=True, **kw)
    other = beam_search(copy_model, src, **fast, **kw)
    if "precision" in fast:  # int8 or bf16 weights: the same phrases met, not the same scores
        for row, wanted in zip(other, phrases, strict=True):
            assert all(contains(row[0].ids, p) for p in wanted)
        return
    assert [r[0].ids for r in other] == [r[0].ids for r in packed]
    assert [r[0].score for r in other] == pytest.approx([r[0].score for r in packed], abs=1e-4)


def test_a_phrase_left_half_way_resets():
    c = Constraints.of([[[5, 6, 7]]], rows=1, pad_id=PAD, device="cpu")
    rows = torch.tensor([0])
    progress = c.start(1)
    for token, (current, position) in zip([5, 6, 9, 5, 6, 7], [(0, 1), (0, 2), (-1, 0), (0, 1), (0, 2), (-1, 0)],
                                          strict=True):
        progress = c.advance(progress, rows, torch.tensor([[token]]))
        assert (int(progress.current), int(progress.position)) == (current, position), token
    assert bool(progress.met.all()) and bool(c.complete(progress, rows).all())
    # a token that leaves a phrase may begin it again
    progress = c.advance(c.advance(c.start(1), rows, torch.tensor([[5]])), rows, torch.tensor([[5]]))
    assert (int(progress.current), int(progress.position)) == (0, 1)


def test_limit_is_raised_and_phrases_too_long_for_the_model_are_refused(copy_model, sources):
    src = sources(3, 3, min_len=2)
    long = [list(range(4, 12)) * 2]  # 16 tokens where max_len would allow 2
    found = beam_search(copy_model, src[:1], bos_id=BOS, eos_id=EOS, max_len=2, beam_size=2,
                        constraints=[long], hypotheses=True)
    assert contains(found[0][0].ids, long[0])
    with pytest.raises(ValueError, match="no room"):
        beam_search(copy_model, src[:1], bos_id=BOS, eos_id=EOS, beam_size=2,
                    constraints=[[list(range(4, 12)) * 4]])
    with pytest.raises(ValueError, match="constraints"):
        beam_search(copy_model, src, bos_id=BOS, eos_id=EOS, constraints=[[[5]]])
    with pytest.raises(ValueError, match="empty"):
        beam_search(copy_model, src[:1], bos_id=BOS, eos_id=EOS, constraints=[[[]]])


def test_constraints_with_prefix_and_guards(copy_model, sources):
    src = sources(4, 6, min_len=2)
    phrases = [[[7, 8]]] * 6
    found = beam_search(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=14, beam_size=3,
                        constraints=phrases, prefixes=[[9]] * 6, no_repeat_ngram=3, hypotheses=True)
    for row in found:
        assert row[0].ids[0] == 9 and contains(row[0].ids, [7, 8])


def test_word_tail_ids_are_the_pieces_that_continue_a_word():
    from transformer.decoding.constraints import word_tail_ids

    pieces = ["<unk>", "<s>", "\u2581Hund", "e", "n", ".", ",", "\u2581", "9", "<0x41>", "<0xC3>",
              "<0x2E>", "\u2581e", "-"]
    # continue a word: "e", "n", "9", byte "A", a byte of a multi-byte character
    assert word_tail_ids(pieces) == [3, 4, 8, 9, 10]


@pytest.mark.parametrize("seed", range(4))
def test_a_phrase_met_is_never_extended_by_a_word_tail(copy_model, sources, seed):
    """The copy model copies its source, so a phrase taken from inside a source row is followed,
    unless stopped, by the row's next token. With those tokens as word tails, the token after the
    phrase is EOS or another; every phrase still appears."""
    src = sources(seed, 12, min_len=4)
    rng = random.Random(seed)
    phrases, tails = [], set()
    for row in src.tolist():
        ids = [t for t in row if t != PAD]
        length = rng.randint(1, 2)  # a one-token phrase is met as it begins
        start = rng.randrange(0, len(ids) - length)
        phrases.append([ids[start : start + length]])
        tails.add(ids[start + length])  # what the copy would put right after the phrase
    tails -= {EOS, PAD}
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=16, beam_size=4, constraints=phrases)
    free = beam_search(copy_model, src, **kw)
    guarded = beam_search(copy_model, src, word_tails=sorted(tails), **kw)

    def after(ids, phrase):  # the token after the phrase's first whole appearance (None: end)
        at = next(i for i in range(len(ids)) if ids[i : i + len(phrase)] == phrase)
        return ids[at + len(phrase)] if at + len(phrase) < len(ids) else None

    assert any(after(ids, p[0]) in tails for ids, p in zip(free, phrases, strict=True))
    for ids, (phrase,) in zip(guarded, phrases, strict=True):
        assert contains(ids, phrase) and after(ids, phrase) not in tails, (ids, phrase)


def test_a_prefix_may_extend_a_phrase_it_meets(copy_model, sources):
    """The word-tail rule is the search's, not the user's: a target prefix that meets a phrase and
    goes on with a word tail is kept as given, and the rest is decoded."""
    src = sources(3, 4, min_len=4)
    rows = [[t for t in row if t != PAD] for row in src.tolist()]
    phrases = [[row[:1]] for row in rows]
    prefixes = [row[:2] for row in rows]  # the phrase, then the next token: a word tail here
    tails = sorted({row[1] for row in rows} - {EOS, PAD})
    found = beam_search(copy_model, src, bos_id=BOS, eos_id=EOS, max_len=16, beam_size=4,
                        constraints=phrases, prefixes=prefixes, word_tails=tails, hypotheses=True)
    for (best, *_), prefix, (phrase,) in zip(found, prefixes, phrases, strict=True):
        assert best.ids[: len(prefix)] == prefix and contains(best.ids, phrase)
        assert best.log_prob > float("-inf") and best.tokens == len(best.ids) - len(prefix) + 1
