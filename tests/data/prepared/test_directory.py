"""Opening a prepared data directory: a damaged or missing one is refused in one line, and the
copy an interrupted prepare left is read."""

from __future__ import annotations

import os

import pytest

from transformer.data.prepared.directory import PreparedData
from transformer.errors import InputError


def test_a_damaged_directory_is_refused_in_one_line(opened, tmp_path):
    data = opened()
    ids = data.root / "train" / "c0" / "tgt.ids"
    with open(ids, "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(InputError, match="tgt.ids"):
        PreparedData.open(data.root).corpora("train")
    with pytest.raises(InputError, match="not a prepared data directory"):
        PreparedData.open(tmp_path)
    # a prepare killed between its two renames: the previous copy, ROOT.old, is read
    old = data.root.with_name(data.root.name + ".old")
    os.rename(data.root, old)
    assert PreparedData.open(data.root).root == old
    os.rename(old, data.root)
    os.remove(data.root / "manifest.json")
    with pytest.raises(InputError, match="manifest.json"):
        PreparedData.open(data.root)
