"""Files derived from a model directory once and kept beside it: another engine's copy of the
model, a compiled decoder. Each is keyed by what it was made from, so a changed model is never
served from a stale copy.

    RUN_DIR/.cache/ctranslate2-int8/     what ``fill`` wrote, and ``key.json``

    path = cached_dir(run_dir, "ctranslate2-int8", key={"weights": weights_sha256(run_dir), ...},
                      fill=lambda tmp: save(tmp))

The cache is made by the first reader and reused by the next ones: ``key.json`` is compared with
the key asked for, and a copy made from other weights (or by another library version) is made
again. A run directory that cannot be written (read-only, another user's) gets its cache under
the user's cache directory instead (``$XDG_CACHE_HOME/transformer``, else ``~/.cache/transformer``),
in a folder named after the run's weights. Each copy is written to a temporary folder of its own
and renamed into place, so several processes starting at once (a server's workers) never see a
half-written one, and the one that renames last wins with an equal copy.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from transformer.errors import WriteError
from transformer.model_dir.record import CONFIG_FILE
from transformer.model_dir.weights import WEIGHTS_FILE

log = logging.getLogger(__name__)

CACHE_DIR = ".cache"
KEY_FILE = "key.json"
WEIGHTS_MEMO = "weights.sha256.json"  # the weights' digest and the stamp of the file it was read from
USER_CACHE_ENV = "XDG_CACHE_HOME"


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes (read in 1 MiB blocks: a big model is never held twice)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _file_stamp(path: Path) -> dict[str, int]:
    """What changes whenever a file's bytes may have: its size, inode, modification and change
    times in nanoseconds (a rewrite, a rename over it, even one that restores the modification
    time, changes the change time)."""
    stat = path.stat()
    return {"size": stat.st_size, "inode": stat.st_ino, "mtime_ns": stat.st_mtime_ns,
            "ctime_ns": stat.st_ctime_ns}


def weights_sha256(run_dir: str | os.PathLike[str]) -> str:
    """The SHA-256 of ``RUN_DIR/model.safetensors``: what every cached copy is keyed by. Read
    once per version of the file: the digest is kept in ``RUN_DIR/.cache/weights.sha256.json``
    with the file's stamp (:func:`_file_stamp`) and reused while the stamp is the same (hashing
    a base model's weights is a quarter of a second of every command that starts)."""
    path = Path(run_dir) / WEIGHTS_FILE
    memo = Path(run_dir) / CACHE_DIR / WEIGHTS_MEMO
    try:
        stamp = _file_stamp(path)
    except OSError:
        return file_sha256(path)  # (raises, naming the file)
    try:
        known = json.loads(memo.read_text())
        if known.get("stamp") == stamp and isinstance(known.get("sha256"), str):
            return known["sha256"]
    except (OSError, ValueError, AttributeError):
        pass
    digest = file_sha256(path)
    if _file_stamp(path) == stamp:  # not replaced while it was read
        with contextlib.suppress(OSError):  # a read-only run: hashed again next time
            memo.parent.mkdir(exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=memo.parent, prefix=f".{WEIGHTS_MEMO}.")
            with os.fdopen(fd, "w") as f:
                json.dump({"stamp": stamp, "sha256": digest}, f)
            os.replace(tmp, memo)
    return digest


def inputs_sha256(run_dir: str | os.PathLike[str]) -> str:
    """One SHA-256 over the run's config.json and tokenizer files: what a converted copy reads
    besides the weights (the model's shape, the vocabularies)."""
    run_dir = Path(run_dir)
    digest = hashlib.sha256()
    files = [run_dir / CONFIG_FILE, *sorted(p for p in (run_dir / "tokenizer").rglob("*") if p.is_file())]
    for path in files:
        digest.update(str(path.relative_to(run_dir)).encode())
        digest.update(file_sha256(path).encode())
    return digest.hexdigest()


def user_cache_root() -> Path:
    """Where caches of read-only run directories go: ``$XDG_CACHE_HOME/transformer``, else
    ``~/.cache/transformer``."""
    base = os.environ.get(USER_CACHE_ENV) or str(Path.home() / ".cache")
    return Path(base) / "transformer"


def _writable_root(run_dir: Path, weights: str) -> Path:
    """``RUN_DIR/.cache`` when it can be created and written, else the user's cache folder for
    this run's weights."""
    root = run_dir / CACHE_DIR
    try:
        root.mkdir(exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=root, prefix=".probe-")  # noqa: SIM115 - closed below
        probe.close()
        return root
    except OSError:
        fallback = user_cache_root() / f"run-{weights[:16]}"
        log.info("%s cannot be written; caching under %s", run_dir, fallback)
        return fallback


def _read_key(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads((path / KEY_FILE).read_text())
    except (OSError, ValueError):
        return None


def cached_dir(run_dir: str | os.PathLike[str], name: str, *, key: Mapping[str, Any],
               fill: Callable[[Path], None]) -> Path:
    """The folder ``name`` of the run's cache whose ``key.json`` equals ``key`` (a JSON-able
    mapping that should hold the weights' SHA-256, as :func:`weights_sha256`), made by
    ``fill(tmp)`` when missing or made from another key. Returns its path.

    ``fill`` writes into an empty temporary folder beside the cache's place; the folder is renamed
    into place only once ``fill`` returned, so a failure or a kill leaves no partial copy (and the
    previous copy, if any, until the new one replaces it). WriteError, naming the folder, when
    neither the run directory nor the user's cache folder can be written.
    """
    run_dir = Path(run_dir)
    key = json.loads(json.dumps(dict(key), sort_keys=True))  # as it reads back from key.json
    weights = str(key.get("weights_sha256", "")) or weights_sha256(run_dir)
    for root in (run_dir / CACHE_DIR, user_cache_root() / f"run-{weights[:16]}"):
        if _read_key(root / name) == key:
            return root / name
    root = _writable_root(run_dir, weights)
    target = root / name
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}.tmp-"))
    except OSError as err:
        raise WriteError(f"{target}: could not write the cache ({err.strerror or err})") from None
    try:
        fill(tmp)
        (tmp / KEY_FILE).write_text(json.dumps(key, indent=2, sort_keys=True) + "\n")
        _swap_in(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _swap_in(tmp: Path, target: Path) -> None:
    """Rename ``tmp`` to ``target``; a stale ``target`` is first moved aside (under a name of its
    own, so two processes swapping at once never remove each other's copy) and then removed."""
    if target.exists():
        aside = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old-"))
        with contextlib.suppress(OSError):  # another process moved it first
            os.replace(target, aside / "copy")
        shutil.rmtree(aside, ignore_errors=True)
    try:
        os.replace(tmp, target)
    except OSError:  # another process put an equal copy there between the two renames
        shutil.rmtree(tmp, ignore_errors=True)
        if _read_key(target) is None:
            raise
