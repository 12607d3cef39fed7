"""Language identification (transformer.inference.langid): at least 99% of test_2016_flickr's
English, German, French and Czech sentences named right among those four, and ranking among a
subset is ranking by a model restricted to it."""

from __future__ import annotations

import gzip

import pytest

pytest.importorskip("py3langid")

LANGS = ("en", "de", "fr", "cs")


@pytest.fixture(scope="module")
def identify():
    from transformer.inference.langid import LanguageIdentifier

    return LanguageIdentifier()


@pytest.mark.parametrize("lang", LANGS)
def test_test_2016_flickr_sides_are_told_apart(identify, shared_data, lang):
    with gzip.open(shared_data / "multi30k" / f"test_2016_flickr.{lang}.gz", "rt", encoding="utf-8") as f:
        texts = [line.strip() for line in f if line.strip()]
    right = sum(identify.rank(t, among=LANGS)[0][0] == lang for t in texts)
    assert len(texts) == 1000 and right / len(texts) >= 0.99, (lang, right)


def test_rank_is_among_the_languages_asked_for_best_first_in_percent(identify):
    ranked = identify.rank("Ein Hund läuft über das Gras.", among=["en", "de", "xx", "de"])
    assert [lang for lang, _ in ranked] == ["de", "en"] and ranked[0][1] > 90
    assert sum(conf for _, conf in ranked) == pytest.approx(100, abs=0.02)
    assert identify.rank("Ein Hund.", among=["xx"]) == [] and identify.known(["xx", "fr"]) == ["fr"]
    # a subset is ranked as a model restricted to it: French text between English and German only
    assert identify.rank("Un chien court.", among=["de", "en"])[0][0] in ("de", "en")


def test_without_py3langid_it_is_a_clear_error(monkeypatch):
    import sys

    from transformer.errors import InputError
    from transformer.inference.langid import LanguageIdentifier

    monkeypatch.setitem(sys.modules, "py3langid.langid", None)
    with pytest.raises(InputError, match="py3langid"):
        LanguageIdentifier()
