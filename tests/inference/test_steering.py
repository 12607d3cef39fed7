"""The translator and the line layer steered: per-sentence target prefixes, sampling that repeats
whatever the batching, and the log-probability every translation carries."""

from __future__ import annotations

import pytest

from transformer.config.decoding import DecodeOptions, OptionError
from transformer.decoding import beam_search, greedy_decode
from transformer.inference.lines import stream_lines, translate_lines
from transformer.inference.translator import Translator

LETTERS = "abcdefghijkl"


class CharTokenizer:
    """Letters a..l are ids 4..15."""

    vocab_size = 16

    def encode(self, text: str) -> list[int]:
        return [4 + LETTERS.index(c) for c in text if c in LETTERS]

    def decode(self, ids) -> str:
        return "".join(LETTERS[i - 4] for i in ids if i >= 4)


def make(model, **options) -> Translator:
    tok = CharTokenizer()
    return Translator(model, tok, tok, bos_id=2, eos_id=3, batch_size=3,
                      options=DecodeOptions(max_len_a=1.0, max_len_b=3, **options))


LINES = ["abc", "kjihgf", "a", "", "bbbb", "lk", "cdefgh", "ee"]


@pytest.mark.parametrize("beam", [1, 3])
def test_per_sentence_prefixes(copy_model, beam):
    translator = make(copy_model, beam_size=beam)
    prefixes = ["lk", "", None, "x", "a", "kkk", "", "f"]
    found = translator.translate(LINES, prefixes=prefixes)
    for line, prefix, t in zip(LINES, prefixes, found, strict=True):
        if line:
            assert t.text.startswith(CharTokenizer().decode(CharTokenizer().encode(prefix or "")))
            alone = translator.translate([line], prefixes=[prefix])[0]
            assert (alone.text, alone.log_prob) == (t.text, pytest.approx(t.log_prob, abs=1e-5))
        else:
            assert t.text == "" and t.log_prob is None
    assert [t.text for t in found] != [t.text for t in translator.translate(LINES)]
    every = make(copy_model, beam_size=beam, target_prefix="lk").translate(LINES)
    assert [t.text for t in every] == [t.text for t in translator.translate(LINES, prefixes=["lk"] * 8)]


def test_log_probs_are_the_searchs(copy_model):
    src_ids = [CharTokenizer().encode(line) for line in LINES if line]
    from transformer.data.padding import pad_rows

    src = pad_rows(src_ids, pad_id=0)
    kw = dict(bos_id=2, eos_id=3, max_len_a=1.0, max_len_b=3, hypotheses=True)
    greedy = make(copy_model, beam_size=1).translate([line for line in LINES if line])
    want = greedy_decode(copy_model, src, **kw)
    assert [(t.log_prob, t.tokens) for t in greedy] == [(pytest.approx(h.log_prob, abs=1e-5), h.tokens) for h in want]
    assert all(t.score is None and t.log_prob < 0 and t.tokens > 0 for t in greedy)
    assert greedy[0].log_prob_per_token == pytest.approx(greedy[0].log_prob / greedy[0].tokens)
    beam = make(copy_model, beam_size=3, nbest=2).translate([line for line in LINES if line])
    want = beam_search(copy_model, src, beam_size=3, nbest=2, **kw)
    for t, hyps in zip(beam, want, strict=True):
        assert t.nbest_log_probs == [(pytest.approx(h.log_prob, abs=1e-5), h.tokens) for h in hyps]
        assert (t.log_prob, t.tokens) == t.nbest_log_probs[0]


def texts(found) -> list[list[str]]:
    return [[text for text, _ in t.nbest] for t in found]


def test_sampling_repeats_whatever_the_batching(copy_model):
    """The same samples alone or batched (their log-probabilities equal up to the float rounding
    of other batch shapes), streamed in chunks or not; another seed, other samples."""
    options = dict(sampling=True, seed=7, temperature=2.0, nbest=2)
    whole = make(copy_model, **options).translate(LINES)
    small = make(copy_model, **options)
    small.batch_size = 1
    alone = small.translate(LINES)
    assert texts(alone) == texts(whole)
    assert [t.log_prob for t in alone] == pytest.approx([t.log_prob for t in whole], abs=1e-5)
    assert texts(make(copy_model, **options).translate(LINES)) == texts(whole)
    streamed = list(stream_lines(make(copy_model, **options), iter(LINES), chunk_size=3))
    assert texts(streamed) == texts(translate_lines(make(copy_model, **options), LINES))
    other = make(copy_model, **{**options, "seed": 8}).translate(LINES)
    assert texts(other) != texts(whole)
    for t in whole[:3]:
        assert t.score == t.nbest[0][1] == t.log_prob and t.nbest[0][1] >= t.nbest[1][1]


def test_unseeded_sampling_differs_between_calls(copy_model):
    translator = make(copy_model, sampling=True, temperature=3.0)
    runs = {tuple(t.text for t in translator.translate(LINES)) for _ in range(3)}
    assert len(runs) > 1


def test_a_line_with_a_prefix_is_translated_whole(copy_model):
    translator = make(copy_model, beam_size=1)
    lines = ["Abc. Kji.", "Abc. Kji."]
    split = translate_lines(translator, lines, prefixes=[None, "k"])
    assert split[0].sentences == 2 and split[1].sentences == 1
    assert split[1].text.startswith("k")
    assert split[0].log_prob == pytest.approx(sum(t.log_prob for t in translator.translate(["Abc.", "Kji."])))
    assert split[0].tokens == sum(t.tokens for t in translator.translate(["Abc.", "Kji."]))
    with pytest.raises(ValueError, match="prefixes: 1 given for 2 lines"):
        translate_lines(translator, lines, prefixes=["k"])


def test_a_prefix_longer_than_the_model_is_refused(copy_model):
    from transformer.errors import InputError

    with pytest.raises(InputError, match="target prefix 'aaaa"):
        make(copy_model, beam_size=1).translate(["abc"], prefixes=["a" * 40])


@pytest.mark.parametrize("bad, field", [
    (dict(sampling=True, beam_size=3), "beam_size"), (dict(seed=1), "seed"),
    (dict(sampling_topk=3), "sampling_topk"), (dict(sampling_topp=0.5), "sampling_topp"),
    (dict(temperature=0.5), "temperature"), (dict(sampling=True, sampling_topp=0.0), "sampling_topp"),
    (dict(sampling=True, temperature=float("nan")), "temperature"),
    (dict(sampling=True, seed=-1), "seed"), (dict(no_repeat_ngram=1.5), "no_repeat_ngram"),
    (dict(repetition_penalty=-1.0), "repetition_penalty"), (dict(target_prefix=3), "target_prefix"),
    (dict(sampling="yes"), "sampling"),
])
def test_options_name_the_field(bad, field):
    with pytest.raises(OptionError) as caught:
        DecodeOptions(**bad)
    assert caught.value.field == field and str(caught.value).startswith(f"{field}: ")


def test_sampling_defaults_to_beam_one():
    assert DecodeOptions(sampling=True).beam_size == 1 and DecodeOptions().beam_size == 4
    assert DecodeOptions(sampling=True, nbest=8).nbest == 8  # samples are not bounded by a beam
