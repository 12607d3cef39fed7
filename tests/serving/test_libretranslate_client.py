"""The real LibreTranslate client (``libretranslatepy``, unchanged) against ``transformer serve``
with an en-de and a de-en model: it translates both ways (each as /v1/translate gives it), detects
and lists the languages."""

from __future__ import annotations

import pytest

from helpers import save_translator

httpx = pytest.importorskip("httpx")
pytest.importorskip("py3langid")
libretranslatepy = pytest.importorskip("libretranslatepy")

from helpers import start_server  # noqa: E402


def test_libretranslatepy_translates_both_ways_detects_and_lists(tmp_path, tokenizer, translation_dir):
    de_en = save_translator(tmp_path / "de-en", tokenizer, seed=1, config={"training": {
        "decode_max_len_a": 0.5, "decode_max_len_b": 3, "src_lang": "de", "tgt_lang": "en"}})
    proc, url = start_server(tmp_path, "--model", f"en-de={translation_dir}", "--model", f"de-en={de_en}")
    try:
        api = libretranslatepy.LibreTranslateAPI(url)
        for model, source, target, text in (("en-de", "en", "de", "A dog runs on the grass."),
                                            ("de-en", "de", "en", "Ein Hund läuft über das Gras.")):
            ours = httpx.post(url + "/v1/translate", json={"model": model, "texts": [text]}, timeout=60)
            assert api.translate(text, source, target, timeout=60) == ours.json()["translations"][0]["text"]
            assert api.detect(text, timeout=60)[0]["language"] == source
        assert api.languages(timeout=60) == [{"code": "de", "name": "German", "targets": ["en"]},
                                             {"code": "en", "name": "English", "targets": ["de"]}]
        assert libretranslatepy.LibreTranslateAPI(url, api_key="ignored").languages(timeout=60)
    finally:
        proc.kill()
        proc.wait()
