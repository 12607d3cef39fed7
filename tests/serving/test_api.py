"""The JSON API in-process against tiny models: every endpoint, compared with the library it
wraps (Translator, Classifier, sentence_attention)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from transformer.config.decoding import DecodeOptions
from transformer.data.builtin_task import english_number
from transformer.inference.loader import load_classifier
from transformer.inference.translator import Translator
from transformer.model_dir import load_model_dir
from transformer.visualization.sentence import sentence_attention

TEXTS = [english_number(n) for n in (7, 42, 365, 1999, 80808)]


def alone(run_dir, texts, **options):
    loaded = load_model_dir(run_dir)
    base = dict(max_len_a=0.5, max_len_b=3)
    return Translator.from_loaded(loaded, options=DecodeOptions(**{**base, **options})).translate(texts)


def test_health_models_openapi_and_page(client):
    assert client.get("/health").json() == {"status": "ok", "models": ["labels", "numbers"]}
    models = {m["name"]: m for m in client.get("/v1/models").json()["models"]}
    assert models["numbers"]["task"] == "translation" and models["numbers"]["max_tokens"] == 48
    assert models["labels"]["labels"] == ["small", "round", "large"] and models["labels"]["multi_label"]
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/translate", "/v1/attention", "/v1/classify", "/v1/models", "/health"} <= set(paths)
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    for name in ("app.js", "style.css"):
        assert name in page.text
        assert client.get(f"/static/{name}").status_code == 200
    assert "http" not in page.text.replace("http-equiv", "")  # no CDN: everything from the package


@pytest.mark.parametrize("options", [dict(beam_size=1), dict(beam_size=3, nbest=2, length_penalty=1.0)])
def test_translate_equals_translator(client, translation_dir, options):
    body = {"model": "numbers", "texts": TEXTS + [""], "beam": options["beam_size"]}
    if "nbest" in options:
        body |= {"nbest": options["nbest"], "length_penalty": options["length_penalty"]}
    got = client.post("/v1/translate", json=body)
    assert got.status_code == 200, got.text
    data = got.json()
    want = alone(translation_dir, TEXTS + [""], **options)
    assert [t["text"] for t in data["translations"]] == [w.text for w in want]
    assert [t["score"] for t in data["translations"]] == [w.score for w in want]
    if "nbest" in options:
        assert [[(c["text"], c["score"]) for c in t["nbest"]] for t in data["translations"]] == \
            [w.nbest for w in want]
        assert all(len(t["nbest"]) == 2 for t in data["translations"][:-1])
    assert data["timing"]["total_ms"] > 0


def test_translate_max_len_caps_output(client, translation_dir):
    data = client.post("/v1/translate", json={"model": "numbers", "texts": TEXTS, "beam": 1,
                                              "max_len": 2}).json()
    want = alone(translation_dir, TEXTS, beam_size=1, max_len=2)
    assert [t["text"] for t in data["translations"]] == [w.text for w in want]
    longer = alone(translation_dir, TEXTS, beam_size=1)
    assert [t["text"] for t in data["translations"]] != [w.text for w in longer]


def test_attention_equals_sentence_attention(client, translation_dir):
    text = english_number(4321)
    data = client.post("/v1/attention", json={"model": "numbers", "text": text}).json()
    want = sentence_attention(load_model_dir(translation_dir), text)
    assert data["output"] == want.output and data["task"] == "translation"
    assert data["source_tokens"] == want.src_tokens and data["target_tokens"] == want.tgt_out_tokens
    S, T = len(want.src_tokens), len(want.tgt_out_tokens)
    for kind, shape in (("encoder", (S, S)), ("decoder", (T, T)), ("cross", (T, S))):
        maps = data["attention"][kind]
        assert len(maps) == 2  # layers
        for got, ref in zip(maps, getattr(want, kind), strict=True):
            got = torch.tensor(got)
            assert got.shape == (4, *shape)
            assert torch.allclose(got, ref, atol=1e-4)
            assert torch.allclose(got.sum(-1), torch.ones(4, shape[0]), atol=1e-3)


def test_attention_shows_one_sentence_of_a_text_at_a_time(client, translation_dir):
    """A text of several sentences: the attention of the sentence asked for (the first by
    default), equal to that sentence's own, with the list of sentences to choose from."""
    text = f"{english_number(4321)}. {english_number(77)}."
    loaded = load_model_dir(translation_dir)
    for number in (None, 1, 2):
        body = {"model": "numbers", "text": text} | ({} if number is None else {"sentence": number})
        data = client.post("/v1/attention", json=body).json()
        assert data["sentences"] == [f"{english_number(4321)}.", f"{english_number(77)}."]
        shown = data["sentences"][(number or 1) - 1]
        want = sentence_attention(loaded, shown)
        assert data["sentence"] == (number or 1) and data["source_tokens"] == want.src_tokens
        assert data["output"] == want.output
    for number, status in ((3, 422), (0, 422)):
        bad = client.post("/v1/attention", json={"model": "numbers", "text": text,
                                                 "sentence": number})
        assert bad.status_code == status and bad.json()["error"].startswith("sentence")


def test_attention_with_forced_target(client, tokenizer):
    target = "dreihundert"
    data = client.post("/v1/attention", json={"model": "numbers", "text": "three hundred",
                                              "target": target}).json()
    pieces = [tokenizer.id_to_piece(i) for i in tokenizer.encode(target)]
    assert data["output"] == target
    assert data["target_tokens"][:-1] == pieces and len(data["attention"]["cross"][0][0]) == len(pieces) + 1


def test_attention_of_a_classifier(client):
    data = client.post("/v1/attention", json={"model": "labels", "text": "forty two"}).json()
    assert data["task"] == "classification" and data["source_tokens"][0] == "[CLS]"
    assert data["attention"]["cross"] == [] and len(data["attention"]["encoder"]) == 1


def test_classify_equals_classifier(client, classifier_dir):
    texts = ["seven", "one hundred", "nine thousand nine hundred"]
    data = client.post("/v1/classify", json={"model": "labels", "texts": texts}).json()
    pred = load_classifier(classifier_dir).predict(texts)
    assert data["thresholds"] == {"small": 0.4, "round": 0.5, "large": 0.6} and data["multi_label"]
    for i, row in enumerate(data["results"]):
        assert row["text"] == texts[i]
        probs = [row["probabilities"][n] for n in ("small", "round", "large")]
        assert np.allclose(probs, pred.probs[i], atol=1e-6)
        assert [lab["label"] for lab in row["labels"]] == [n for n, _ in pred.labels(i)]
        chosen = {n for n, p, t in zip(("small", "round", "large"), probs, (0.4, 0.5, 0.6), strict=True) if p >= t}
        assert {lab["label"] for lab in row["labels"]} == chosen


def test_metrics_count_requests_batches_and_tokens(client, tokenizer):
    client.post("/v1/translate", json={"model": "numbers", "texts": TEXTS[:2], "beam": 1})
    client.post("/v1/translate", json={"model": "nope", "texts": ["x"]})
    text = client.get("/metrics").text
    assert 'transformer_requests_total{method="POST",path="/v1/translate",status="200"} 1' in text
    assert 'transformer_requests_total{method="POST",path="/v1/translate",status="404"} 1' in text
    assert 'transformer_request_seconds_count{path="/v1/translate"} 2' in text
    assert 'transformer_batch_requests_count{model="numbers"} 1' in text
    assert 'transformer_texts_total{model="numbers"} 2' in text
    tokens = sum(len(tokenizer.encode(t)) for t in TEXTS[:2])
    assert f'transformer_source_tokens_total{{model="numbers"}} {tokens}' in text


def test_int8_server_translates_as_the_int8_translator(translation_dir, classifier_dir):
    """--precision int8: the translator decodes with int8 weights (as Translator(precision="int8")
    does), the classifier stays float32, and /v1/models says which."""
    from fastapi.testclient import TestClient

    from transformer.decoding.packing import int8_engine
    from transformer.serving.app import create_app
    from transformer.serving.models import load_served

    if int8_engine() is None:
        pytest.skip("no quantized engine (x86, fbgemm or qnnpack) for this CPU")
    served = load_served({"numbers": str(translation_dir), "labels": str(classifier_dir)},
                         precision="int8")
    assert served["numbers"].translator.decoder.precision == "int8"
    with TestClient(create_app(served)) as client:
        models = {m["name"]: m["precision"] for m in client.get("/v1/models").json()["models"]}
        assert models == {"numbers": "int8", "labels": "fp32"}
        data = client.post("/v1/translate", json={"model": "numbers", "texts": TEXTS, "beam": 3}).json()
    loaded = load_model_dir(translation_dir)
    want = Translator.from_loaded(loaded, precision="int8", options=DecodeOptions(
        beam_size=3, max_len_a=0.5, max_len_b=3)).translate(TEXTS)
    assert [t["text"] for t in data["translations"]] == [w.text for w in want]
