"""What a prepared data directory's content depends on: its inputs' hashes and the options, as one
key. ``prepare`` stores the key in the manifest and, finding an equal one there, does nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from transformer.data.prepared.layout import FORMAT_VERSION, MANIFEST, SIDES
from transformer.data.prepared.request import PrepareRequest
from transformer.data.prepared.tokenizers import tokenizer_folder


def file_sha256(path: Path, *, chunk: int = 1 << 22) -> str:
    """The sha256 of a file's bytes (a gzip file's compressed bytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def folder_sha256(path: Path) -> str:
    """One sha256 over every file of a folder (names and bytes, in sorted order): the hash of a
    tokenizer folder."""
    digest = hashlib.sha256()
    for child in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(child.relative_to(path).as_posix().encode() + b"\0")
        digest.update(file_sha256(child).encode())
    return digest.hexdigest()


def input_files(request: PrepareRequest) -> list[dict[str, Any]]:
    """Every input file of ``request`` as the manifest lists it: split, corpus, side, resolved path,
    size and sha256."""
    out = []
    for split, pairs in (("train", request.train), ("valid", request.valid)):
        for index, (src, tgt) in enumerate(pairs):
            for side, path in zip(SIDES, (src, tgt), strict=True):
                p = Path(path)
                out.append({"split": split, "corpus": index, "side": side,
                            "path": str(p.resolve()), "size": p.stat().st_size,
                            "sha256": file_sha256(p)})
    return out


def tokenizer_key(request: PrepareRequest) -> dict[str, Any]:
    """The tokenizer's part of the key: the folder it is copied from and that folder's hash, or
    the options it is trained with."""
    if request.tokenizer_from is not None:
        folder = tokenizer_folder(request.tokenizer_from)
        return {"from": str(Path(request.tokenizer_from).resolve()), "sha256": folder_sha256(folder)}
    return {"vocab_size": request.vocab_size, "sample": request.tokenizer_sample,
            "joint": request.joint, "model_type": request.model_type,
            "byte_fallback": request.byte_fallback,
            "character_coverage": request.character_coverage, "seed": request.seed}


def request_key(request: PrepareRequest, inputs: list[dict[str, Any]]) -> dict[str, Any]:
    """Everything the directory's content depends on: equal keys, equal directories."""
    return {"format_version": FORMAT_VERSION, "inputs": inputs,
            "weights": None if request.weights is None else [float(w) for w in request.weights],
            "tags": None if request.tags is None else list(request.tags),
            "tokenizer": tokenizer_key(request), "filters": request.filters.to_dict()}


def current_key(out: Path) -> dict[str, Any] | None:
    """The key stored in ``out``'s manifest; None when there is no readable one."""
    try:
        return json.loads((out / MANIFEST).read_text(encoding="utf-8")).get("request")
    except (OSError, ValueError, AttributeError):
        return None
