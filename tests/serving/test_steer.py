"""``POST /v1/translate`` steered: sampling, target prefixes (one for all texts or one per text,
batched together across requests), the repetition guards and the log-probability of every
translation; each against the library, and a 422 naming the field for a bad value."""

from __future__ import annotations

import pytest

from transformer.config.decoding import DecodeOptions
from transformer.data.builtin_task import english_number
from transformer.inference.lines import translate_lines
from transformer.inference.translator import Translator
from transformer.model_dir import load_model_dir

TEXTS = [english_number(n) for n in (7, 42, 365, 1999)]
LIMITS = dict(max_len_a=0.5, max_len_b=3)


def library(run_dir, texts, *, prefixes=None, **options):
    translator = Translator.from_loaded(load_model_dir(run_dir), options=DecodeOptions(**LIMITS, **options))
    return translate_lines(translator, texts, src_lang="en", tgt_lang="de", prefixes=prefixes,
                           keys=list(range(len(texts))))


def post(client, **body):
    response = client.post("/v1/translate", json={"model": "numbers", "texts": TEXTS, **body})
    assert response.status_code == 200, response.text
    return response.json()["translations"]


def test_log_probabilities_in_every_answer(client, translation_dir):
    for body, options in (({"beam": 1}, dict(beam_size=1)), ({"beam": 3, "nbest": 2}, dict(beam_size=3, nbest=2))):
        got = post(client, **body)
        want = library(translation_dir, TEXTS, **options)
        for row, t in zip(got, want, strict=True):
            assert row["log_prob"] == pytest.approx(t.log_prob, abs=1e-5)
            assert row["log_prob_per_token"] == pytest.approx(t.log_prob / t.tokens, abs=1e-5)
            for entry, (lp, n) in zip(row.get("nbest", []), t.nbest_log_probs, strict=True):
                assert (entry["log_prob"], entry["log_prob_per_token"]) == (pytest.approx(lp, abs=1e-5),
                                                                            pytest.approx(lp / n, abs=1e-5))


def test_sampling_repeats_for_a_seed(client, translation_dir):
    body = dict(sampling=True, seed=3, temperature=1.5, sampling_topk=30, nbest=2)
    first = post(client, **body)
    assert post(client, **body) == first
    want = library(translation_dir, TEXTS, sampling=True, seed=3, temperature=1.5, sampling_topk=30, nbest=2)
    assert [[n["text"] for n in row["nbest"]] for row in first] == [[t for t, _ in w.nbest] for w in want]
    assert [row["text"] for row in post(client, **{**body, "seed": 4})] != [row["text"] for row in first]


def test_prefixes_and_guards(client, translation_dir, tokenizer):
    got = post(client, beam=2, target_prefix="drei", no_repeat_ngram=2, repetition_penalty=1.2)
    want = library(translation_dir, TEXTS, beam_size=2, target_prefix="drei", no_repeat_ngram=2,
                   repetition_penalty=1.2)
    assert [r["text"] for r in got] == [t.text for t in want]
    assert all(r["text"].startswith(tokenizer.decode(tokenizer.encode("drei"))) for r in got)
    prefixes = ["zwei", "", "drei hundert", "tausend"]
    got = post(client, beam=1, target_prefixes=prefixes)
    want = library(translation_dir, TEXTS, beam_size=1, prefixes=prefixes)
    assert [r["text"] for r in got] == [t.text for t in want]


def test_requests_that_differ_only_in_prefixes_share_one_call(served, translation_dir, monkeypatch):
    from transformer.serving import models

    calls = []
    real = models.translate_lines

    def counted(translator, texts, **kw):
        calls.append(len(texts))
        return real(translator, texts, **kw)

    monkeypatch.setattr(models, "translate_lines", counted)
    options = load_model_dir(translation_dir).record.decode_options(beam_size=1)
    payloads = [(TEXTS[:2], options, True, ["zwei", ""]), (TEXTS[2:], options, True, ["drei", "vier"]),
                (TEXTS[:1], options, True)]
    found = served["numbers"].translate_batch(payloads)
    assert calls == [5]  # one call for all three requests
    assert [t.text for t in found[0]] == [t.text for t in library(translation_dir, TEXTS[:2], beam_size=1,
                                                                  prefixes=["zwei", ""])]
    assert [t.text for t in found[1]] == [t.text for t in library(translation_dir, TEXTS[2:], beam_size=1,
                                                                  prefixes=["drei", "vier"])]
    assert [t.text for t in found[2]] == [t.text for t in library(translation_dir, TEXTS[:1], beam_size=1)]


@pytest.mark.parametrize("body, words", [
    ({"sampling": True, "beam": 3}, ["beam", "sampling"]),
    ({"seed": 4}, ["seed", "sampling"]),
    ({"temperature": 0.5}, ["temperature"]),
    ({"sampling": True, "temperature": 0}, ["temperature", "positive"]),
    ({"sampling": True, "sampling_topp": 1.5}, ["sampling_topp"]),
    ({"sampling": True, "sampling_topk": -1}, ["sampling_topk"]),
    ({"sampling": "yes"}, ["sampling", "boolean"]),
    ({"no_repeat_ngram": -1}, ["no_repeat_ngram"]),
    ({"repetition_penalty": 0}, ["repetition_penalty"]),
    ({"target_prefix": "a", "target_prefixes": ["a"] * 4}, ["target_prefixes", "not both"]),
    ({"target_prefixes": ["a"]}, ["target_prefixes", "1 given for 4"]),
    ({"target_prefix": "drei " * 60}, ["target_prefix", "tokens"]),
    ({"target_prefixes": ["", "", "", "drei " * 60]}, ["target_prefixes", "tokens"]),
])
def test_bad_values_name_the_field(client, body, words):
    response = client.post("/v1/translate", json={"model": "numbers", "texts": TEXTS, **body})
    assert response.status_code == 422, response.text
    line = response.json()["error"]
    assert "\n" not in line and all(word in line for word in words), line
    assert client.post("/v1/translate", json={"model": "numbers", "texts": TEXTS[:1]}).status_code == 200


def test_a_tag_goes_before_every_sentence_and_an_unknown_one_is_refused(client, translation_dir):
    translator = Translator.from_loaded(load_model_dir(translation_dir),
                                        options=DecodeOptions(**LIMITS, beam_size=1))
    tag = translator.src_tokenizer.id_to_piece(10)  # any source piece serves as a tag
    want = translate_lines(translator, TEXTS, src_lang="en", tgt_lang="de", source_prefix=[10])
    got = post(client, beam=1, tag=tag)
    assert [row["text"] for row in got] == [t.text for t in want]
    assert [row["text"] for row in post(client, beam=1)] != [t.text for t in want]
    response = client.post("/v1/translate", json={"model": "numbers", "texts": TEXTS,
                                                  "tag": ">>xyz<<"})
    assert response.status_code == 422
    assert response.json()["error"].startswith("tag: the model's source vocabulary has no piece")
