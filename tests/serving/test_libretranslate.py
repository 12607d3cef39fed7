"""LibreTranslate's API beside /v1/: every translation equals /v1/translate's for the same text and
model, parameters from JSON, forms and the query string, routing by pair and by detected
language, and every refusal in LibreTranslate's status and shape. (The real client against a
``transformer serve`` process: test_libretranslate_client.py.)"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import save_translator
from transformer.serving.cost import ServiceCost

pytest.importorskip("py3langid")

EN = "A dog runs across the green grass."
DE = "Ein Hund läuft über das grüne Gras."
FR = "Un chien court sur l'herbe verte."


@pytest.fixture(scope="session")
def lt_served(tmp_path_factory, tokenizer, translation_dir):
    """en-de (the session's numbers model), de-en (its record says so) and fr-de (a record without
    languages: stated with ServeSettings.model_languages, as serve --languages does)."""
    from transformer.serving.models import load_served

    root = tmp_path_factory.mktemp("libretranslate")
    de_en = save_translator(root / "de-en", tokenizer, seed=1, config={"training": {
        "decode_max_len_a": 0.5, "decode_max_len_b": 3, "src_lang": "de", "tgt_lang": "en"}})
    fr_de = save_translator(root / "fr-de", tokenizer, seed=2, config={"training": {
        "decode_max_len_a": 0.5, "decode_max_len_b": 3}})
    return load_served({"en-de": str(translation_dir), "de-en": str(de_en), "fr-de": str(fr_de)})


@pytest.fixture
def lt(make_client, lt_served):
    """``lt(**settings)`` -> a client of the three models, fr-de's languages stated."""
    from transformer.serving.settings import ModelLanguages

    def make(**settings):
        return make_client(lt_served, model_languages=(ModelLanguages("fr-de", "fr", ("de",)),),
                           **settings)

    return make


def v1(client, model, texts, **options):
    answer = client.post("/v1/translate", json={"model": model, "texts": texts, **options})
    assert answer.status_code == 200, answer.text
    return answer.json()["translations"]


def test_json_translations_equal_v1_both_ways_and_as_a_list(lt):
    client = lt()
    for model, source, target, text in (("en-de", "en", "de", EN), ("de-en", "de", "en", DE)):
        one = client.post("/translate", json={"q": text, "source": source, "target": target})
        assert one.status_code == 200, one.text
        assert one.json() == {"translatedText": v1(client, model, [text])[0]["text"]}
    many = client.post("/translate", json={"q": [EN, "two dogs."], "source": "EN", "target": "de"})
    assert many.json() == {"translatedText": [t["text"] for t in v1(client, "en-de", [EN, "two dogs."])]}


def test_form_multipart_and_query_string_parameters(lt):
    client = lt()
    want = v1(client, "en-de", [EN])[0]["text"]
    params = {"q": EN, "source": "en", "target": "de"}
    assert client.post("/translate", data=params).json() == {"translatedText": want}
    assert client.post("/translate", params=params).json() == {"translatedText": want}
    multipart = client.post("/translate", files={k: (None, v) for k, v in params.items()})
    assert multipart.status_code == 200 and multipart.json() == {"translatedText": want}
    # the query string and the form together, the query string first (LibreTranslate's request.values)
    split = client.post("/translate?source=en&target=de", data={"q": EN, "target": "en"})
    assert split.json() == {"translatedText": want}


def test_auto_routes_each_text_by_its_detected_language(lt):
    """Into German, among the sources that reach it (en, fr) and German itself: each text goes to
    its language's model (as /v1/translate gives it), German comes back as it is, and each text
    has its detectedLanguage."""
    client = lt()
    answer = client.post("/translate", json={"q": [EN, FR, DE], "source": "auto", "target": "de"}).json()
    assert answer["translatedText"] == [v1(client, "en-de", [EN])[0]["text"],
                                        v1(client, "fr-de", [FR])[0]["text"], DE]
    assert [d["language"] for d in answer["detectedLanguage"]] == ["en", "fr", "de"]
    assert all(50 < d["confidence"] <= 100 for d in answer["detectedLanguage"])
    one = client.post("/translate", data={"q": DE, "source": "auto", "target": "en"}).json()
    assert one["translatedText"] == v1(client, "de-en", [DE])[0]["text"]
    assert one["detectedLanguage"]["language"] == "de" and set(one) == {"translatedText", "detectedLanguage"}


def test_alternatives_are_the_rest_of_the_nbest_only_when_asked(lt):
    client = lt()
    answer = client.post("/translate", json={"q": EN, "source": "en", "target": "de", "alternatives": 2}).json()
    nbest = v1(client, "en-de", [EN], nbest=3)[0]["nbest"]
    assert answer == {"translatedText": nbest[0]["text"], "alternatives": [n["text"] for n in nbest[1:]]}
    many = client.post("/translate", json={"q": [EN, EN], "source": "en", "target": "de",
                                           "alternatives": "1"}).json()
    assert many["alternatives"] == [[nbest[1]["text"]]] * 2
    assert "alternatives" not in client.post("/translate", json={"q": EN, "source": "en", "target": "de",
                                                                 "alternatives": 0}).json()


HTML_EN = '<p lang="en">A <b>dog</b> runs across the <a href="/g">green grass</a>.</p>'


def test_html_keeps_its_markup_as_v1_translates_it_with_no_alternatives(lt):
    """format html: each text translated as /v1/translate's format html does (the same model and
    markup placement), a list too; alternatives are not offered for HTML (an empty list each, as
    LibreTranslate answers)."""
    client = lt()
    want = v1(client, "en-de", [HTML_EN, "<i>two dogs.</i>"], format="html")
    one = client.post("/translate", json={"q": HTML_EN, "source": "en", "target": "de",
                                          "format": "html"})
    assert one.status_code == 200, one.text
    assert one.json() == {"translatedText": want[0]["text"]}
    assert 'lang="de"' in want[0]["text"] and 'href="/g"' in want[0]["text"]
    many = client.post("/translate", json={"q": [HTML_EN, "<i>two dogs.</i>"], "source": "en",
                                           "target": "de", "format": "html", "alternatives": "2"})
    assert many.json() == {"translatedText": [w["text"] for w in want], "alternatives": [[], []]}
    text = client.post("/translate", json={"q": HTML_EN, "source": "en", "target": "de"}).json()
    assert text["translatedText"] == v1(client, "en-de", [HTML_EN])[0]["text"] != want[0]["text"]


def test_html_is_detected_by_its_words_not_its_markup(lt):
    """source auto with HTML: the language of the text a reader sees (English words in French
    markup attributes still read as English), each document routed by it."""
    client = lt()
    doc = ('<p data-note="un chien court sur l\'herbe verte de la maison" class="vert">'
           '<b>A dog runs.</b></p>')  # read whole, it is French
    answer = client.post("/translate", json={"q": [doc, f"<p>{DE}</p>"], "source": "auto",
                                             "target": "de", "format": "html"}).json()
    assert [d["language"] for d in answer["detectedLanguage"]] == ["en", "de"]
    assert answer["translatedText"] == [v1(client, "en-de", [doc], format="html")[0]["text"],
                                        f"<p>{DE}</p>"]


def test_detect_ranks_the_languages_served_best_first(lt):
    client = lt()
    for text, lang in ((EN, "en"), (DE, "de"), (FR, "fr")):
        found = client.post("/detect", data={"q": text}).json()
        assert found[0]["language"] == lang and len(found) == 3
        assert [f["confidence"] for f in found] == sorted((f["confidence"] for f in found), reverse=True)
        assert {f["language"] for f in found} <= {"en", "de", "fr"}
    assert client.post("/detect", json={"q": DE}).json()[0]["language"] == "de"


def test_languages_lists_every_language_and_its_targets_even_for_a_get_with_a_body(lt):
    client = lt()
    want = [{"code": "de", "name": "German", "targets": ["en"]},
            {"code": "en", "name": "English", "targets": ["de"]},
            {"code": "fr", "name": "French", "targets": ["de"]}]
    assert client.get("/languages").json() == want
    assert client.request("GET", "/languages", content=b"api_key=",
                          headers={"content-type": "application/x-www-form-urlencoded"}).json() == want


def test_cors_allows_any_origin_on_these_routes_only(lt):
    client = lt()
    assert client.get("/languages").headers["access-control-allow-origin"] == "*"
    bad = client.post("/translate", json={"source": "en", "target": "de"})
    assert bad.status_code == 400 and bad.headers["access-control-allow-origin"] == "*"
    pre = client.options("/translate", headers={"origin": "moz-extension://x",
                                                "access-control-request-method": "POST",
                                                "access-control-request-headers": "content-type"})
    assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == "*"
    assert "POST" in pre.headers["access-control-allow-methods"]
    assert "access-control-allow-origin" not in client.get("/v1/models").headers


def refused(answer, status, *words):
    assert answer.status_code == status, answer.text
    assert set(answer.json()) == {"error"} and "\n" not in answer.json()["error"]
    for word in words:
        assert word in answer.json()["error"], answer.json()
    return answer


@pytest.mark.parametrize(("body", "words"), [
    ({"source": "en", "target": "de"}, ["missing q"]),
    ({"q": "", "source": "en", "target": "de"}, ["missing q"]),
    ({"q": EN, "target": "de"}, ["missing source"]),
    ({"q": EN, "source": "en"}, ["missing target"]),
    ({"q": [EN, 3], "source": "en", "target": "de"}, ["q[1]"]),
    ({"q": EN, "source": "xx", "target": "de"}, ["source", "xx is not supported", "en-de, de-en, fr-de"]),
    ({"q": EN, "source": "en", "target": "xx"}, ["target", "xx"]),
    ({"q": EN, "source": "fr", "target": "en"}, ["target", "from fr", "en-de, de-en, fr-de"]),
    ({"q": ["<p>a</p>", "<p>\x00</p>"], "source": "en", "target": "de", "format": "html"},
     ["q[1]", "not an HTML document"]),
    ({"q": "<p>\x01</p>", "source": "auto", "target": "de", "format": "html"}, ["q:", "U+0001"]),
    ({"q": EN, "source": "en", "target": "de", "format": "pdf"}, ["format", "pdf"]),
    ({"q": EN, "source": "en", "target": "de", "alternatives": "two"}, ["alternatives", "not a number"]),
    ({"q": EN, "source": "en", "target": "de", "alternatives": 4}, ["alternatives", "<= 3", "beam"]),
    ({"q": "x" * 1001, "source": "en", "target": "de"}, ["q", "1000 characters"]),
    ({"q": ["one"] * 65, "source": "en", "target": "de"}, ["q", "at most 64"]),
])
def test_a_bad_translate_request_gets_400_naming_its_parameter(lt, body, words):
    refused(lt().post("/translate", json=body), 400, *words)


def test_a_body_that_is_not_a_json_object_or_over_the_limit_gets_400(lt):
    client = lt(max_body_bytes=2000)
    refused(client.post("/translate", content=b"[1]", headers={"content-type": "application/json"}),
            400, "JSON object")
    refused(client.post("/translate", content=b"{", headers={"content-type": "application/json"}),
            400, "JSON")
    refused(client.post("/translate", data={"q": "x" * 3000}), 400, "body", "2000 bytes")
    refused(client.post("/detect", data={}), 400, "missing q")


def test_keys_in_libretranslate_terms(lt):
    """With keys: none is 400, an unknown one 403, a good one from the JSON body, the form, the
    query string or a header passes, and over its rate 429 (counted); /languages needs none."""
    from transformer.serving.settings import ApiKey

    client = lt(api_keys=(ApiKey("good", per_minute=5, name="k1"),))
    body = {"q": EN, "source": "en", "target": "de"}
    refused(client.post("/translate", json=body), 400, "api_key")
    refused(client.post("/translate", json={**body, "api_key": ""}), 400, "api_key")
    refused(client.post("/translate", json={**body, "api_key": "bad"}), 403, "api_key")
    refused(client.post("/detect", data={"q": EN, "api_key": "bad"}), 403, "api_key")
    assert client.post("/translate", json={**body, "api_key": "good"}).status_code == 200
    assert client.post("/translate", data={**body, "api_key": "good"}).status_code == 200
    assert client.post("/translate", params={**body, "api_key": "good"}).status_code == 200
    assert client.post("/translate", json=body, headers={"x-api-key": "good"}).status_code == 200
    assert client.post("/detect", json={"q": EN, "api_key": "good"}).status_code == 200
    over = refused(client.post("/translate", json={**body, "api_key": "good"}), 429, "rate")
    assert int(over.headers["retry-after"]) >= 1
    assert 'transformer_rate_limited_total{key="k1"} 1' in client.get("/metrics").text
    assert client.get("/languages").status_code == 200


def test_a_key_is_ignored_on_a_server_without_keys(lt):
    answer = lt().post("/translate", json={"q": EN, "source": "en", "target": "de", "api_key": "any"})
    assert answer.status_code == 200


def hold(monkeypatch, model):
    """``model``'s first batch waits for the returned event; returns (event, batch sizes)."""
    release, sizes, run = threading.Event(), [], model.translate_batch

    def held(payloads):
        sizes.append(len(payloads))
        if len(sizes) == 1:
            release.wait(60)
        return run(payloads)

    monkeypatch.setattr(model, "translate_batch", held)
    return release, sizes


def until(condition, what):
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


BODY = {"q": "seven", "source": "en", "target": "de"}


def test_a_full_queue_is_429(lt, lt_served, monkeypatch):
    release, sizes = hold(monkeypatch, lt_served["en-de"])
    client = lt(max_queue_wait_s=0.5)
    batcher = client.app.fastapi.state.batchers["en-de"]
    with ThreadPoolExecutor(2) as pool:
        busy = pool.submit(client.post, "/translate", json=BODY)
        until(lambda: batcher.running_tokens > 0, "the first request never ran")
        queued = pool.submit(client.post, "/translate", json=BODY)
        until(lambda: batcher.queued == 1, "the second request never queued")
        batcher.cost = ServiceCost(per_text_s=1e6, per_token_s=1e6)  # any queue is weeks of work
        shed = refused(client.post("/translate", json=BODY), 429, "'en-de'")
        assert int(shed.headers["retry-after"]) >= 1 and shed.headers["access-control-allow-origin"] == "*"
        metrics = client.get("/metrics").text
        assert 'transformer_shed_total{model="en-de",reason="queue_full"} 1' in metrics
        assert 'path="/translate",status="429"} 1' in metrics
        release.set()
        assert busy.result().status_code == queued.result().status_code == 200


def test_a_deadline_passed_in_the_queue_is_500(lt, lt_served, monkeypatch):
    release, sizes = hold(monkeypatch, lt_served["en-de"])
    client = lt(timeout_s=0.05)
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(client.post, "/translate", json=BODY)
        until(lambda: sizes, "the first request never ran")
        refused(client.post("/translate", json=BODY), 500, "timeout")
        assert 'transformer_shed_total{model="en-de",reason="deadline"} 1' in client.get("/metrics").text
        release.set()
        assert busy.result().status_code == 200
    assert sizes == [1]  # the late request never ran


def test_every_queue_full_sheds_translate_with_429_before_parsing(lt, lt_served, monkeypatch):
    client = lt()
    monkeypatch.setattr(client.app, "every_queue_full", lambda: 2.0)
    refused(client.post("/translate", content=b"not json", headers={"content-type": "application/json"}),
            429, "every model")


def test_routes_of_a_multi_target_model_are_its_tags(lt_served):
    """A model with >>id<< tags serves one pair per tag (the tag put before each sentence);
    stated languages pick among them; a model without languages serves no pair."""
    from dataclasses import replace

    from transformer.serving.libretranslate import Route, language_routes
    from transformer.serving.metrics import Metrics
    from transformer.serving.settings import ModelLanguages, ServeSettings
    from transformer.serving.state import ServerState

    multi = replace(lt_served["en-de"], name="en-mul")
    multi.language_tags = ["deu", "FRA"]
    state = ServerState(served={"en-mul": multi, "fr-de": lt_served["fr-de"]}, metrics=Metrics())
    assert language_routes(state) == {("en", "deu"): Route("en-mul", ">>deu<<"),
                                      ("en", "fra"): Route("en-mul", ">>FRA<<")}
    state.settings = ServeSettings(model_languages=(ModelLanguages("en-mul", "en", ("fra", "it")),))
    assert language_routes(state) == {("en", "fra"): Route("en-mul", ">>FRA<<"),
                                      ("en", "it"): Route("en-mul", None)}


def test_without_language_detection_auto_is_a_400_naming_it(lt, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "py3langid.langid", None)
    client = lt()
    refused(client.post("/translate", json={"q": EN, "source": "auto", "target": "de"}), 400,
            "source", "py3langid")
    assert client.post("/translate", json={"q": EN, "source": "en", "target": "de"}).status_code == 200
