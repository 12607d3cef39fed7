"""Corpus registry: Multi30k by name from the search folders, the download path without a
network, GoEmotions and NSMC by name, and the real shared files."""

from __future__ import annotations

import gzip
import io
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from transformer.data import corpora
from transformer.data.corpora import data_root, data_roots, load_classification_corpus, load_corpus
from transformer.errors import InputError


def make_multi30k(root: Path, split: str, langs: dict[str, str]) -> None:
    folder = root / "multi30k"
    folder.mkdir(parents=True, exist_ok=True)
    for lang, text in langs.items():
        (folder / f"{split}.{lang}.gz").write_bytes(gzip.compress(text.encode()))


@pytest.fixture
def offline(monkeypatch, tmp_path: Path) -> list[str]:
    """No network: every urlopen fails (and is recorded); the cache is an empty temp folder."""
    calls: list[str] = []

    def refuse(url, timeout=None):
        calls.append(url)
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return calls


def test_found_in_given_root(tmp_path: Path, offline: list[str]) -> None:
    make_multi30k(tmp_path, "val", {"en": "A dog.\nA cat.\n", "fr": "Un chien.\nUn chat.\n"})
    corpus = load_corpus("multi30k", "valid", "en", "fr", roots=[tmp_path])
    assert corpus.pairs() == [("A dog.", "Un chien."), ("A cat.", "Un chat.")]
    assert corpus.name == "multi30k/val.en-fr"
    assert offline == []


def test_found_through_transformer_data(tmp_path: Path, monkeypatch, offline: list[str]) -> None:
    make_multi30k(tmp_path / "mine", "test_2016_flickr", {"en": "x\n", "cs": "y\n"})
    monkeypatch.setenv("TRANSFORMER_DATA", str(tmp_path / "mine"))
    assert data_roots()[0] == tmp_path / "mine"
    assert data_root() == tmp_path / "mine"
    assert load_corpus("multi30k", "test", "en", "cs").pairs() == [("x", "y")]


def test_search_order_ends_in_the_user_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("TRANSFORMER_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    roots = data_roots()
    assert roots[-1] == tmp_path / "transformer"
    repo = Path(corpora.__file__).resolve().parents[3]
    assert roots[0] == repo.parent / "shared" / "data"


def test_offline_missing_files_say_where_to_put_them(tmp_path: Path, offline: list[str]) -> None:
    with pytest.raises(InputError) as err:
        load_corpus("multi30k", "train", "en", "de", roots=[tmp_path / "empty"])
    message = str(err.value)
    assert "\n" not in message
    assert "multi30k train.en not found" in message
    assert "network is unreachable" in message
    assert "put train.en.gz in a multi30k/ folder" in message
    assert offline == [corpora.MULTI30K_URL.format(file="train.en.gz")]
    assert not (tmp_path / "cache" / "transformer" / "multi30k" / "train.en.gz").exists()


def test_no_download_when_disallowed(tmp_path: Path, offline: list[str]) -> None:
    with pytest.raises(InputError, match="not found"):
        load_corpus("multi30k", "val", "en", "de", roots=[tmp_path], allow_download=False)
    assert offline == []


def test_download_goes_to_the_cache(tmp_path: Path, monkeypatch) -> None:
    """The download path with a stand-in for the server: files land in the cache atomically."""
    served = {"val.en.gz": "A dog.\n", "val.de.gz": "Ein Hund.\n"}

    def serve(url, timeout=None):
        assert timeout is not None and timeout <= 30
        return io.BytesIO(gzip.compress(served[url.rsplit("/", 1)[1]].encode()))

    monkeypatch.setattr(urllib.request, "urlopen", serve)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    corpus = load_corpus("multi30k", "val", "en", "de", roots=[tmp_path / "none"])
    assert corpus.pairs() == [("A dog.", "Ein Hund.")]
    cached = tmp_path / "cache" / "transformer" / "multi30k"
    assert sorted(p.name for p in cached.iterdir()) == ["val.de.gz", "val.en.gz"]


def test_truncated_download_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(
        urllib.request,
        "urlopen",
        lambda url, timeout=None: io.BytesIO(gzip.compress(b"x" * 999)[:-9]),
    )
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(InputError, match="download .* failed"):
        load_corpus("multi30k", "val", "en", "de", roots=[tmp_path / "none"])
    assert list((tmp_path / "cache" / "transformer" / "multi30k").iterdir()) == []


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("wmt14", "train", "en", "de"), "unknown corpus 'wmt14'"),
        (("multi30k", "holdout", "en", "de"), "unknown multi30k split 'holdout'"),
        (("multi30k", "train", "en", "ja"), "no language 'ja'"),
        (("multi30k", "test_2017_mscoco", "en", "cs"), "no language 'cs'"),
        (("multi30k", "train", "en", "en"), "both 'en'"),
    ],
)
def test_bad_names(args: tuple[str, ...], match: str, offline: list[str]) -> None:
    with pytest.raises(InputError, match=match):
        load_corpus(*args)


def test_real_multi30k(shared_data: Path) -> None:
    """The shared copy of Multi30k task 1: split sizes as published (Elliott et al., 2016)."""
    roots = [shared_data]
    train = load_corpus("multi30k", "train", "en", "de", roots=roots, allow_download=False)
    assert (len(train), train.num_empty_dropped) == (29000, 0)
    assert train.src[0] == "Two young, White males are outside near many bushes."
    assert train.tgt[0] == "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche."
    for split, size in (("val", 1014), ("test_2016_flickr", 1000)):
        for src, tgt in (("en", "fr"), ("cs", "de")):
            corpus = load_corpus("multi30k", split, src, tgt, roots=roots, allow_download=False)
            assert len(corpus) == size


def test_unknown_corpus_and_split(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown classification corpus 'imdb'"):
        load_classification_corpus("imdb", "train")
    with pytest.raises(InputError, match="unknown nsmc split 'dev'"):
        load_classification_corpus("nsmc", "dev")
    with pytest.raises(InputError, match="goemotions test not found .* put test.tsv.gz"):
        load_classification_corpus("goemotions", "test", roots=[tmp_path])


def test_real_goemotions(shared_data: Path) -> None:
    """GoEmotions dev (Demszky et al., 2020): 5,426 comments, 28 labels, some with several."""
    data = load_classification_corpus("goemotions", "dev", roots=[shared_data])
    assert len(data) == 5426 and data.num_labels == 28
    assert data.label_names[0] == "admiration" and data.label_names[27] == "neutral"
    assert data.multi_label and max(len(ids) for ids in data.labels) >= 3
    assert data.texts[0] == "Is this in New Orleans?? I really feel like this is New Orleans."
    assert data.labels[0] == [27]  # neutral


def test_real_nsmc(shared_data: Path) -> None:
    """NSMC train: 150,000 reviews of which 5 are empty (its SOURCE.md), binary labels."""
    data = load_classification_corpus("nsmc", "train", roots=[shared_data])
    assert (len(data), data.num_empty_dropped) == (150_000 - 5, 5)
    assert data.label_names == ("negative", "positive") and not data.multi_label
    assert data.texts[0] == "아 더빙.. 진짜 짜증나네요 목소리" and data.labels[0] == [0]
    positives = sum(ids == [1] for ids in data.labels)
    assert 74_000 < positives < 75_000  # 74,827 positive rows before the 5 empty ones
