"""``transformer prepare``: parallel text -> a prepared data directory (see
:mod:`transformer.data.prepared.layout`), in constant memory whatever the corpus size.

    request = PrepareRequest(train=[("a.en", "a.de"), ("b.en", "b.de")], weights=[1, 3],
                             valid=[("dev.en", "dev.de")], vocab_size=8000, out="data/ab")
    summary = prepare(request)

Stages, each logged in one line with its counts and seconds:

1. inputs: every file's size and sha256. When ``out`` already holds a directory prepared from the
   same inputs with the same options (tokenizer, filters, weights), nothing else happens
   (:mod:`~transformer.data.prepared.fingerprint`).
2. tokenizer: taken from a run (``tokenizer_from``) or trained on a reservoir sample of
   ``tokenizer_sample`` sentences drawn in one pass over the training text
   (:mod:`~transformer.data.prepared.tokenizers`).
3. encode: the line pairs stream in chunks through a process pool (``workers``); each worker
   strips, encodes and filters its chunk and hands back flat id arrays
   (:mod:`~transformer.data.prepared.chunk_encoding`), which the main process appends to the id
   files. The training split also applies ``filters``
   (:class:`~transformer.data.prepared.request.Filters`), ``dedup`` here, across all training
   corpora; the validation split only loses empty pairs.
4. the manifest, then the whole directory is renamed into place (``atomic.replace_dir``): a
   failure or a kill at any point leaves the previous directory, or none, never half of one.

Memory: a chunk per worker in flight, the tokenizer's sample while it trains, and with ``dedup``
an 8-byte hash per kept training pair (:class:`~transformer.data.seen_hashes.SeenHashes`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from transformer.atomic import atomic_write_text, replace_dir
from transformer.data.prepared.chunk_encoding import (
    CHUNK_PAIRS,
    REASONS,
    ChunkEncoder,
    iter_line_pairs,
    line_chunks,
)
from transformer.data.prepared.fingerprint import (
    current_key,
    folder_sha256,
    input_files,
    request_key,
)
from transformer.data.prepared.layout import (
    FORMAT_VERSION,
    MANIFEST,
    REFERENCES,
    SIDES,
    TOKENIZER_DIR,
    corpus_dir,
    id_dtype,
)
from transformer.data.prepared.request import Filters, PrepareRequest
from transformer.data.prepared.shards import ShardWriter
from transformer.data.prepared.tokenizers import make_tokenizers, tag_ids
from transformer.data.seen_hashes import SeenHashes
from transformer.errors import InputError

log = logging.getLogger(__name__)


def prepare(request: PrepareRequest, *, progress: bool = False) -> dict[str, Any]:
    """Write the prepared data directory ``request.out``; returns a summary (``up_to_date`` when
    the directory was already prepared from the same inputs and options)."""
    request.check()
    out = Path(request.out)
    began = time.perf_counter()
    inputs = input_files(request)
    _stage("inputs", began, f"{len(inputs)} files, {sum(i['size'] for i in inputs):,} bytes hashed")
    key = request_key(request, inputs)
    if current_key(out) == key:
        log.info("prepare: %s is up to date with its inputs and options; nothing to do", out)
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
        return {**_summary(out, manifest), "up_to_date": True}
    workers = request.workers or os.cpu_count() or 1
    manifest: dict[str, Any] = {}

    def fill(tmp: Path) -> None:
        manifest.update(_write(tmp, request, key=key, workers=workers, progress=progress))

    began = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    replace_dir(out, fill)
    _stage("written", began, str(out))
    return {**_summary(out, manifest), "up_to_date": False}


def _write(tmp: Path, request: PrepareRequest, *, key: dict[str, Any], workers: int,
           progress: bool) -> dict[str, Any]:
    """Stages 2 to 4 into the fresh directory ``tmp``: the tokenizers, every split's ids, then the
    manifest, which it returns."""
    began = time.perf_counter()
    src_tok, tgt_tok, sampled, what = make_tokenizers(request, tmp / TOKENIZER_DIR)
    _stage("tokenizer", began, what)
    dtype = id_dtype(max(src_tok.vocab_size, tgt_tok.vocab_size))
    ids = tag_ids(src_tok, request.tags, source="the tokenizer")
    tags = None if ids is None else [None if i is None else (t, i)
                                     for t, i in zip(request.tags, ids, strict=True)]
    splits = {}
    encoder = ChunkEncoder(min(workers, 64), (src_tok, tgt_tok, dtype.str))
    try:
        for split, pairs in (("train", request.train), ("valid", request.valid)):
            if pairs:
                splits[split] = _encode_split(
                    tmp, split, pairs, encoder, dtype=dtype, progress=progress, tags=tags,
                    filters=request.filters if split == "train" else None)
    finally:
        encoder.close()
    manifest = {
        "format_version": FORMAT_VERSION,
        "command": list(request.command),
        "inputs": key["inputs"],
        "tokenizer": {**key["tokenizer"], "folder_sha256": folder_sha256(tmp / TOKENIZER_DIR),
                      "src_vocab_size": src_tok.vocab_size,
                      "tgt_vocab_size": tgt_tok.vocab_size, "sampled_sentences": sampled},
        "id_dtype": dtype.str,
        "filters": request.filters.to_dict(),
        "weights": key["weights"],
        "tags": key["tags"],
        "splits": splits,
        "request": key,
    }
    atomic_write_text(tmp / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def _encode_split(tmp: Path, split: str, pairs: Sequence[tuple[str, str]], encoder: ChunkEncoder,
                  *, dtype: np.dtype, filters: Filters | None, progress: bool,
                  tags: list[tuple[str, int] | None] | None = None) -> list[dict[str, Any]]:
    """Encode every corpus of ``split`` into ``tmp`` (corpus k's sources led by ``tags[k]``, its
    text and id, when given and not None); the corpora's manifest entries."""
    seen = SeenHashes()  # one for the split: dedup drops a pair seen in any earlier corpus too
    infos = []
    for index, (src_path, tgt_path) in enumerate(pairs):
        began = time.perf_counter()
        info = _encode_corpus(corpus_dir(tmp, split, index), src_path, tgt_path, encoder, seen,
                              dtype=dtype, filters=filters, references=split == "valid",
                              tag=None if tags is None else tags[index],
                              bar_label=f"{split} {Path(src_path).name}" if progress else None)
        infos.append(info)
        _stage(f"encode {split} {index}", began,
               f"{info['name']}: {info['lines']:,} line pairs -> {info['pairs']:,} kept, "
               f"{info['tokens']['src']:,}+{info['tokens']['tgt']:,} tokens; dropped "
               f"{_counts(info['dropped'])}; truncated {info['truncated']:,}")
    return infos


def _encode_corpus(folder: Path, src_path: str, tgt_path: str, encoder: ChunkEncoder,
                   seen: SeenHashes, *, dtype: np.dtype, filters: Filters | None,
                   references: bool, bar_label: str | None,
                   tag: tuple[str, int] | None = None) -> dict[str, Any]:
    """Encode one corpus into ``folder``: its two sides' id files (every source row led by
    ``tag``'s id when given) and, with ``references``, its kept targets as text; a progress bar
    named ``bar_label`` unless None. Returns its manifest entry; InputError when no pair is
    left."""
    writers = {side: ShardWriter(folder, side, dtype) for side in SIDES}
    texts = open(folder / REFERENCES, "w", encoding="utf-8") if references else None  # noqa: SIM115
    dropped = dict.fromkeys(REASONS, 0)
    lines = truncated = 0
    bar = _bar(bar_label)
    chunks = line_chunks(iter_line_pairs(src_path, tgt_path), CHUNK_PAIRS)
    held: deque = deque()  # validation keeps its references' text: each chunk's targets
    if texts is not None:
        chunks = _remember(chunks, held)
    try:
        for out in encoder.run(chunks, filters, tag):
            n = len(out["reason"])
            lines += n
            counts = np.bincount(out["reason"], minlength=len(REASONS) + 1)
            for code, name in enumerate(REASONS, start=1):
                dropped[name] += int(counts[code])
            if filters is not None and filters.dedup:
                out = _drop_seen(out, seen, dropped)
            truncated += int(out["truncated"][out["kept"]].sum())
            writers["src"].append(out["src_ids"], out["src_len"])
            writers["tgt"].append(out["tgt_ids"], out["tgt_len"])
            if texts is not None:
                tgt_lines = held.popleft()
                texts.write("".join(tgt_lines[i] + "\n" for i in out["kept"].tolist()))
            if bar is not None:
                bar.update(n)
    finally:
        for w in writers.values():
            w.close()
        if texts is not None:
            texts.close()
        if bar is not None:
            bar.close()
    if writers["src"].rows == 0:
        raise InputError(f"{src_path} and {tgt_path}: no line pair is left to train on "
                         f"({lines} lines read; dropped {_counts(dropped)})")
    return {"name": f"{Path(src_path).name} + {Path(tgt_path).name}", "src": str(src_path),
            "tgt": str(tgt_path), "lines": lines, "pairs": writers["src"].rows,
            "tokens": {side: writers[side].tokens for side in SIDES},
            "dropped": dropped, "truncated": truncated, **({"tag": tag[0]} if tag else {})}


def _drop_seen(out: dict[str, np.ndarray], seen: SeenHashes,
               dropped: dict[str, int]) -> dict[str, np.ndarray]:
    """An encoded chunk without the pairs whose hash ``seen`` already holds (counted in
    ``dropped``); the chunk's new hashes join ``seen``."""
    fresh = seen.add(out["hash"])
    if fresh.all():
        return out
    dropped["dedup"] += int((~fresh).sum())
    src_ids, src_len = _select(out["src_ids"], out["src_len"], fresh)
    tgt_ids, tgt_len = _select(out["tgt_ids"], out["tgt_len"], fresh)
    return {**out, "src_ids": src_ids, "src_len": src_len, "tgt_ids": tgt_ids,
            "tgt_len": tgt_len, "kept": out["kept"][fresh]}


def _select(ids: np.ndarray, lengths: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of flat ``ids`` where ``keep`` is true."""
    return ids[np.repeat(keep, lengths)], lengths[keep]


def _remember(chunks: Iterator[tuple[list[str], list[str]]],
              held: deque) -> Iterator[tuple[list[str], list[str]]]:
    """``chunks``, each one's target lines appended to ``held`` as it goes out."""
    for chunk in chunks:
        held.append(chunk[1])
        yield chunk


def _stage(name: str, began: float, what: str) -> None:
    log.info("prepare: %s: %s (%.1fs)", name, what, time.perf_counter() - began)


def _bar(what: str | None) -> Any:
    if what is None:
        return None
    from tqdm import tqdm

    return tqdm(total=None, desc=what, unit=" pairs", unit_scale=True, file=sys.stderr,
                dynamic_ncols=True)


def _counts(dropped: dict[str, int]) -> str:
    parts = [f"{name} {count:,}" for name, count in dropped.items() if count]
    return ", ".join(parts) if parts else "none"


def _summary(out: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """The JSON summary ``transformer prepare --json`` prints."""
    splits = manifest.get("splits", {})
    return {
        "out": str(out),
        "manifest_sha256": hashlib.sha256((out / MANIFEST).read_bytes()).hexdigest(),
        "id_dtype": manifest.get("id_dtype"),
        "vocab_size": [manifest["tokenizer"]["src_vocab_size"], manifest["tokenizer"]["tgt_vocab_size"]],
        **{f"{split}_pairs": sum(c["pairs"] for c in corpora) for split, corpora in splits.items()},
        "dropped": {split: {r: sum(c["dropped"][r] for c in corpora) for r in REASONS}
                    for split, corpora in splits.items()},
        "truncated": {split: sum(c["truncated"] for c in corpora) for split, corpora in splits.items()},
    }
