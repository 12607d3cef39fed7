"""Corpora known by name, found on disk or downloaded: Multi30k (Elliott et al., 2016) for
translation, GoEmotions (English Reddit comments, 28 emotions, multi-label) and NSMC (Korean movie
reviews, negative/positive) for classification.

Where files are looked for, in order (the first folder holding the file wins):

1. ``$TRANSFORMER_DATA`` (when set),
2. ``../shared/data`` beside the project checkout (found from this package's location, then from
   the current directory),
3. the user cache, ``$XDG_CACHE_HOME/transformer`` or ``~/.cache/transformer``.

Each corpus lives in its own subfolder (``multi30k/train.en.gz``; uncompressed ``train.en`` works
too). When a Multi30k file is nowhere and the network is up, it is downloaded from the dataset's
public repository (github.com/multi30k/dataset, ``data/task1/raw``) into the cache folder; when
offline, :func:`load_corpus` raises one :class:`InputError` line saying where to put the files.
Any other corpus is read by path with :func:`transformer.data.parallel.read_parallel` or
:func:`transformer.data.classification.read_classification`.
"""

from __future__ import annotations

import gzip
import http.client
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from transformer.atomic import atomic_write
from transformer.data.classification import ClassificationData, read_classification
from transformer.data.labels import LabelVocabulary
from transformer.data.parallel import ParallelCorpus, read_parallel
from transformer.errors import InputError

log = logging.getLogger(__name__)

MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{file}"
MULTI30K_LANGS = ("en", "de", "fr", "cs")
# split -> languages it exists in (the 2017 test sets have no Czech)
MULTI30K_SPLITS: dict[str, tuple[str, ...]] = {
    "train": MULTI30K_LANGS,
    "val": MULTI30K_LANGS,
    "test_2016_flickr": MULTI30K_LANGS,
    "test_2017_flickr": ("en", "de", "fr"),
    "test_2017_mscoco": ("en", "de", "fr"),
    "test_2018_flickr": MULTI30K_LANGS,
}
SPLIT_ALIASES = {"valid": "val", "validation": "val", "dev": "val", "test": "test_2016_flickr"}
CORPORA = ("multi30k",)
DOWNLOAD_TIMEOUT_S = 10.0

_PACKAGE_DIR = Path(__file__).resolve().parent  # src/transformer/data


def cache_dir() -> Path:
    """The user cache folder for downloads: ``$XDG_CACHE_HOME/transformer`` or
    ``~/.cache/transformer`` (not created here)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "transformer"


def data_roots() -> list[Path]:
    """Every folder searched for corpora, in search order, whether or not it exists."""
    roots: list[Path] = []
    if os.environ.get("TRANSFORMER_DATA"):
        roots.append(Path(os.environ["TRANSFORMER_DATA"]).expanduser())
    # src/transformer/data -> checkout root is three levels up; shared/ sits beside the checkout
    roots.append(_PACKAGE_DIR.parents[2].parent / "shared" / "data")
    roots.append(Path.cwd().parent / "shared" / "data")
    roots.append(cache_dir())
    unique: list[Path] = []
    for root in roots:
        if root not in unique:
            unique.append(root)
    return unique


def data_root() -> Path:
    """The first existing folder of :func:`data_roots`, else the cache folder (where downloads
    go)."""
    for root in data_roots():
        if root.is_dir():
            return root
    return cache_dir()


def normalize_split(split: str) -> str:
    """Map "valid"/"dev" to "val" and "test" to "test_2016_flickr"; others unchanged."""
    return SPLIT_ALIASES.get(split, split)


def find_file(corpus: str, file: str, *, roots: Sequence[Path] | None = None) -> Path | None:
    """``<root>/<corpus>/<file>`` (or the same without ``.gz``) in the first root that has it."""
    for root in data_roots() if roots is None else roots:
        for candidate in (root / corpus / file, root / corpus / file.removesuffix(".gz")):
            if candidate.is_file():
                return candidate
    return None


def download(url: str, target: Path, *, timeout: float = DOWNLOAD_TIMEOUT_S) -> Path:
    """Fetch ``url`` into ``target`` atomically (temporary file, then rename); a gzip target is
    checked to decompress before it replaces anything. Raises OSError (URLError, timeout) when
    offline or the server refuses."""
    target.parent.mkdir(parents=True, exist_ok=True)

    def fetch(tmp: Path) -> None:
        with open(tmp, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
            while chunk := response.read(1 << 20):
                out.write(chunk)
        if target.name.endswith(".gz"):
            with gzip.open(tmp, "rb") as check:
                while check.read(1 << 20):
                    pass

    atomic_write(target, fetch)
    return target


def _multi30k_file(
    split: str, lang: str, *, roots: Sequence[Path] | None, allow_download: bool
) -> Path:
    file = f"{split}.{lang}.gz"
    found = find_file("multi30k", file, roots=roots)
    if found is not None:
        return found
    searched = ", ".join(str(r) for r in (data_roots() if roots is None else roots))
    target = cache_dir() / "multi30k" / file
    where = (
        f"put {file} in a multi30k/ folder under $TRANSFORMER_DATA or {cache_dir()}, "
        f"or pass file paths instead"
    )
    if not allow_download:
        raise InputError(f"multi30k {split}.{lang} not found (searched {searched}): {where}")
    url = MULTI30K_URL.format(file=file)
    log.info("downloading %s to %s", url, target)
    try:
        return download(url, target)
    except (OSError, EOFError, http.client.HTTPException) as err:
        reason = getattr(err, "reason", None) or err
        raise InputError(
            f"multi30k {split}.{lang} not found (searched {searched}) and the download from "
            f"{url} failed ({reason}): {where}"
        ) from None


def load_corpus(
    name: str,
    split: str,
    src_lang: str,
    tgt_lang: str,
    *,
    roots: Sequence[Path] | None = None,
    allow_download: bool = True,
) -> ParallelCorpus:
    """A named parallel corpus, e.g. ``load_corpus("multi30k", "train", "en", "de")``.

    Multi30k splits: train (29,000 pairs), val (1,014), test_2016_flickr (1,000), and the later
    test sets test_2017_flickr, test_2017_mscoco (no Czech) and test_2018_flickr; "valid"/"dev"
    and "test" are accepted for val and test_2016_flickr. Languages: en, de, fr, cs. ``roots``
    replaces the search folders of :func:`data_roots`; ``allow_download=False`` never touches the
    network. Raises :class:`InputError` for an unknown name, split or language, and for missing
    files that cannot be downloaded (one line saying where to put them).
    """
    key = name.lower()
    if key not in CORPORA:
        raise InputError(
            f"unknown corpus {name!r}: known corpora are {', '.join(CORPORA)}; "
            "pass --train-src/--train-tgt files for any other"
        )
    split = normalize_split(split)
    if split not in MULTI30K_SPLITS:
        raise InputError(
            f"unknown multi30k split {split!r}: expected one of {', '.join(MULTI30K_SPLITS)}"
        )
    for lang in (src_lang, tgt_lang):
        if lang not in MULTI30K_SPLITS[split]:
            raise InputError(
                f"multi30k {split} has no language {lang!r}: expected one of "
                f"{', '.join(MULTI30K_SPLITS[split])}"
            )
    if src_lang == tgt_lang:
        raise InputError(f"source and target language are both {src_lang!r}")
    src_path = _multi30k_file(split, src_lang, roots=roots, allow_download=allow_download)
    tgt_path = _multi30k_file(split, tgt_lang, roots=roots, allow_download=allow_download)
    return read_parallel(src_path, tgt_path, name=f"multi30k/{split}.{src_lang}-{tgt_lang}")


CLASSIFICATION_CORPORA = ("goemotions", "nsmc")
_CLASSIFICATION_SPLITS = {
    "goemotions": {"train": "train.tsv.gz", "dev": "dev.tsv.gz", "test": "test.tsv.gz"},
    "nsmc": {"train": "ratings_train.txt.gz", "test": "ratings_test.txt.gz"},
}
_CLASSIFICATION_ALIASES = {"valid": "dev", "validation": "dev", "val": "dev"}
NSMC_LABELS = ("negative", "positive")


def load_classification_corpus(
    name: str, split: str, *, roots: Sequence[Path] | None = None
) -> ClassificationData:
    """A known classification corpus, found like the translation corpora (see
    :mod:`transformer.data.corpora`): ``goemotions`` (splits train, dev; test when present) with
    its 28 emotion names from ``emotions.txt``, multi-label; ``nsmc`` (train; test when present),
    labels ``negative``/``positive`` (ids 0/1). Raises :class:`InputError` for an unknown name or
    split and for missing files (saying where to put them)."""
    key = name.lower()
    if key not in CLASSIFICATION_CORPORA:
        raise InputError(
            f"unknown classification corpus {name!r}: known are {', '.join(CLASSIFICATION_CORPORA)}; "
            "pass a TSV/CSV/JSONL file for any other"
        )
    split = _CLASSIFICATION_ALIASES.get(split, split)
    files = _CLASSIFICATION_SPLITS[key]
    if split not in files:
        raise InputError(f"unknown {key} split {split!r}: expected one of {', '.join(files)}")
    path = find_file(key, files[split], roots=roots)
    if path is None:
        searched = ", ".join(str(r) for r in (data_roots() if roots is None else roots))
        raise InputError(
            f"{key} {split} not found (searched {searched}): put {files[split]} (or the same "
            f"without .gz) in a {key}/ folder under $TRANSFORMER_DATA, or pass the file path"
        )
    if key == "goemotions":
        names_path = path.parent / "emotions.txt"
        if not names_path.is_file():
            found = find_file(key, "emotions.txt", roots=roots)
            if found is None:
                raise InputError(f"{names_path}: GoEmotions label names (emotions.txt) not found")
            names_path = found
        vocab = LabelVocabulary.from_names_file(names_path)
        data = read_classification(path, text_column=0, label_column=1, labels=vocab, format="tsv")
    else:
        data = read_classification(
            path, text_column="document", label_column="label", labels=NSMC_LABELS, format="tsv"
        )
    data.name = f"{key}/{split}"
    return data
