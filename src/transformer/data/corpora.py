"""Corpora known by name, found on disk or downloaded: Multi30k (Elliott et al., 2016).

Where files are looked for, in order (the first folder holding the file wins):

1. ``$TRANSFORMER_DATA`` (when set),
2. ``../shared/data`` beside the project checkout (found from this package's location, then from
   the current directory),
3. the user cache, ``$XDG_CACHE_HOME/transformer`` or ``~/.cache/transformer``.

Each corpus lives in its own subfolder (``multi30k/train.en.gz``; uncompressed ``train.en`` works
too). When a Multi30k file is nowhere and the network is up, it is downloaded from the dataset's
public repository (github.com/multi30k/dataset, ``data/task1/raw``) into the cache folder; when
offline, :func:`load_corpus` raises one :class:`InputError` line saying where to put the files.
Any other corpus is read by path with :func:`transformer.data.parallel.read_parallel`.
"""

from __future__ import annotations

import gzip
import http.client
import logging
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

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
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
            while chunk := response.read(1 << 20):
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        if target.name.endswith(".gz"):
            with gzip.open(tmp, "rb") as check:
                while check.read(1 << 20):
                    pass
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
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
