"""``POST /v1/translate`` splits each text into sentences unless ``"split": false``; texts keep
their order and count, an empty text stays empty, a too-long sentence is cut and counted."""

from __future__ import annotations

from transformer.config.decoding import DecodeOptions
from transformer.inference.translator import Translator
from transformer.model_dir import load_model_dir

SENTENCES = ["Twenty one.", "Three hundred and five!", "Seven?"]
LONG = ", ".join(["one hundred and twenty three"] * 8)  # one sentence, over the model's 48 positions


def alone(run_dir, texts):
    options = DecodeOptions(beam_size=2, max_len_a=0.5, max_len_b=3)
    return [t.text for t in Translator.from_loaded(load_model_dir(run_dir), options=options).translate(texts)]


def test_translate_splits_unless_asked_not_to(client, translation_dir):
    texts = [" ".join(SENTENCES), "", "forty two", "Nine. Eleven."]
    body = {"model": "numbers", "texts": texts, "beam": 2}
    split = client.post("/v1/translate", json=body)
    whole = client.post("/v1/translate", json={**body, "split": False})
    assert split.status_code == whole.status_code == 200, split.text + whole.text
    got = [row["text"] for row in split.json()["translations"]]
    one = alone(translation_dir, [*SENTENCES, "forty two", "Nine.", "Eleven."])
    assert got == [" ".join(one[:3]), "", one[3], " ".join(one[4:])]
    assert [row["sentences"] for row in split.json()["translations"]] == [3, 0, 1, 2]
    assert [row["text"] for row in whole.json()["translations"]] == alone(translation_dir, texts)
    assert [row["sentences"] for row in whole.json()["translations"]] == [1, 0, 1, 1]


def test_a_too_long_sentence_is_cut_and_counted(client):
    rows = client.post("/v1/translate", json={"model": "numbers", "texts": ["seven", LONG],
                                              "beam": 1}).json()["translations"]
    assert [row["cut_sentences"] for row in rows] == [0, 1]
