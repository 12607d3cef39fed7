"""An opened prepared data directory (see :mod:`transformer.data.prepared.layout`), its manifest
checked, its corpora memory-mapped.

    data = PreparedData.open("data/wmt14")
    pairs = data.pairs("train", max_len=256, on_long="truncate")   # what the batches index
    src_ids, tgt_ids = pairs[0]                                    # lists of ints
    epochs = MixedEpochs(pairs, weights=data.weights, collate=collate_pairs, max_tokens=4096)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from transformer.data.prepared.layout import (
    FORMAT_VERSION,
    MANIFEST,
    REFERENCES,
    SIDES,
    TOKENIZER_DIR,
    corpus_dir,
)
from transformer.data.prepared.pairs import PreparedPairs
from transformer.data.prepared.shards import PreparedCorpus, Shard
from transformer.errors import InputError


class PreparedData:
    """An opened prepared data directory (see the module docstring); :meth:`open` checks it."""

    def __init__(self, root: Path, manifest: dict[str, Any], manifest_sha256: str) -> None:
        self.root = root
        self.manifest = manifest
        self.manifest_sha256 = manifest_sha256

    @classmethod
    def open(cls, root: str | Path) -> PreparedData:
        from transformer.atomic import existing_dir

        # a prepare killed between its two renames leaves the complete previous copy as ROOT.old
        root = existing_dir(root) or Path(root)
        path = root / MANIFEST
        if not root.is_dir():
            raise InputError(f"{root}: prepared data directory not found (make one with "
                             "`transformer prepare`)")
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise InputError(f"{path}: not found; {root} is not a prepared data directory "
                             "(make one with `transformer prepare`)") from None
        try:
            manifest = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise InputError(f"{path}: unreadable manifest ({err})") from None
        version = manifest.get("format_version") if isinstance(manifest, dict) else None
        if version != FORMAT_VERSION:
            raise InputError(f"{path}: format_version {version!r} is not supported "
                             f"(expected {FORMAT_VERSION}); prepare the directory again")
        return cls(root, manifest, hashlib.sha256(raw).hexdigest())

    @property
    def weights(self) -> list[float] | None:
        """The training corpora's mixing weights, or None: every pair once per epoch."""
        return self.manifest.get("weights")

    def has_split(self, split: str) -> bool:
        return bool(self.manifest["splits"].get(split))

    def corpora(self, split: str) -> list[PreparedCorpus]:
        """The corpora of ``split`` (memory-mapped), in the order they were given."""
        dtype = np.dtype(self.manifest["id_dtype"])
        out = []
        for index, info in enumerate(self.manifest["splits"].get(split) or []):
            folder = corpus_dir(self.root, split, index)
            sides = [Shard(folder, side, rows=info["pairs"], tokens=info["tokens"][side], dtype=dtype)
                     for side in SIDES]
            out.append(PreparedCorpus(info["name"], sides[0], sides[1], info))
        return out

    def tokenizers(self) -> tuple[Any, Any]:
        """The (source, target) tokenizers the ids were made with."""
        from transformer.data.tokenizer_pair import load_tokenizers

        return load_tokenizers(self.root / TOKENIZER_DIR)

    def references(self, split: str) -> list[str]:
        """The target sentences of ``split`` as text, corpus after corpus (validation's BLEU)."""
        lines: list[str] = []
        for index, corpus in enumerate(self.corpora(split)):
            path = corpus_dir(self.root, split, index) / REFERENCES
            try:
                text = path.read_text(encoding="utf-8").split("\n")[:-1]
            except FileNotFoundError:
                raise InputError(f"{path}: missing from the prepared data directory") from None
            if len(text) != len(corpus):
                raise InputError(f"{path}: {len(text)} lines for {len(corpus)} pairs; prepare the "
                                 "directory again")
            lines += text
        return lines

    def pairs(self, split: str, *, max_len: int, on_long: str = "truncate") -> PreparedPairs:
        """The pairs of ``split`` fitted to a model of ``max_len`` positions (see
        :class:`PreparedPairs`)."""
        corpora = self.corpora(split)
        if not corpora:
            raise InputError(f"{self.root}: no {split} split in the prepared data")
        return PreparedPairs(corpora, max_len=max_len, on_long=on_long,
                             name=f"{self.root}/{split}")
