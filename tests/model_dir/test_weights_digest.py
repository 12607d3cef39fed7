"""The weights' SHA-256, which every cached copy of a run is keyed by, is read once per version
of the file: kept beside the run with the file's stamp, and read again whenever the file may have
changed (even rewritten to the same size with its modification time put back)."""

from __future__ import annotations

import hashlib
import os

import pytest

from transformer.model_dir import cache
from transformer.model_dir.cache import CACHE_DIR, WEIGHTS_MEMO, weights_sha256


@pytest.fixture
def run(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"first weights")
    return tmp_path


def test_the_digest_is_the_files_and_is_read_once(run, monkeypatch):
    assert weights_sha256(run) == hashlib.sha256(b"first weights").hexdigest()
    assert (run / CACHE_DIR / WEIGHTS_MEMO).is_file()
    monkeypatch.setattr(cache, "file_sha256", lambda path: pytest.fail("hashed again"))
    assert weights_sha256(run) == hashlib.sha256(b"first weights").hexdigest()


def test_a_rewritten_file_is_hashed_again_even_with_its_old_size_and_time(run):
    path = run / "model.safetensors"
    weights_sha256(run)
    before = path.stat()
    path.write_bytes(b"other weights")  # the same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert weights_sha256(run) == hashlib.sha256(b"other weights").hexdigest()


def test_a_run_that_cannot_be_written_is_hashed_each_time(run, monkeypatch):
    (run / CACHE_DIR).write_text("not a folder")  # the memo cannot be written
    assert weights_sha256(run) == hashlib.sha256(b"first weights").hexdigest()
    assert weights_sha256(run) == hashlib.sha256(b"first weights").hexdigest()


def test_a_damaged_memo_is_read_past(run):
    weights_sha256(run)
    (run / CACHE_DIR / WEIGHTS_MEMO).write_text("{not json")
    assert weights_sha256(run) == hashlib.sha256(b"first weights").hexdigest()
