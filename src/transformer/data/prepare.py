"""``transformer prepare``: parallel text -> a prepared data directory (see
:mod:`transformer.data.prepared`), in constant memory whatever the corpus size.

    request = PrepareRequest(train=[("a.en", "a.de"), ("b.en", "b.de")], weights=[1, 3],
                             valid=[("dev.en", "dev.de")], vocab_size=8000, out="data/ab")
    summary = prepare(request)

Stages, each logged in one line with its counts and seconds:

1. inputs: every file's size and sha256. When ``out`` already holds a directory prepared from the
   same inputs with the same options (tokenizer, filters, weights), nothing else happens.
2. tokenizer: taken from a run (``tokenizer_from``) or trained on a reservoir sample of
   ``tokenizer_sample`` sentences drawn in one pass over the training text.
3. encode: the line pairs stream in chunks through a process pool (``workers``); each worker
   strips, encodes and filters its chunk and hands back flat id arrays, which the main process
   appends to the id files. Line pairs with an empty side are dropped (``empty``), as are pairs
   that encode to no tokens (``empty_encoded``); the training split also applies ``filters``:
   ``max-len=N`` drops a pair with a side longer than N tokens, ``ratio=R`` one whose longer side
   has more than R times the tokens of the shorter, ``dedup`` a pair seen before (same source and
   target text, across all training corpora), ``truncate=N`` cuts sides longer than N tokens
   (counted as truncated). The validation split only loses empty pairs.
4. the manifest, then the whole directory is renamed into place (``atomic.replace_dir``): a
   failure or a kill at any point leaves the previous directory, or none, never half of one.

Memory: a chunk per worker in flight, the tokenizer's sample while it trains, and with ``dedup``
an 8-byte hash per kept training pair (:class:`~transformer.data.seen_hashes.SeenHashes`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import shutil
import sys
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from transformer.atomic import atomic_write_text, replace_dir
from transformer.data.prepared import (
    FORMAT_VERSION,
    MANIFEST,
    REFERENCES,
    SIDES,
    TOKENIZER_DIR,
    ShardWriter,
    corpus_dir,
    file_sha256,
    folder_sha256,
    id_dtype,
)
from transformer.data.seen_hashes import SeenHashes
from transformer.data.text_files import iter_file_lines
from transformer.errors import InputError

log = logging.getLogger(__name__)

CHUNK_PAIRS = 4096
FILTER_KEYS = ("max-len", "ratio", "dedup", "truncate")
# why a line pair is left out, in the order the checks run (code 0 is "kept")
REASONS = ("empty", "empty_encoded", "max_len", "ratio", "dedup")


@dataclass(frozen=True)
class Filters:
    """What the training split keeps (see the module docstring); all off by default."""

    max_len: int | None = None
    ratio: float | None = None
    dedup: bool = False
    truncate: int | None = None

    @classmethod
    def parse(cls, text: str | None) -> Filters:
        """``"max-len=256,ratio=3,dedup"`` -> Filters; InputError naming a bad item."""
        if not text:
            return cls()
        values: dict[str, Any] = {}
        for item in text.split(","):
            key, _, value = item.strip().partition("=")
            if key not in FILTER_KEYS:
                raise InputError(f"--filter {item!r}: unknown filter {key!r}; known: "
                                 f"{', '.join(FILTER_KEYS)} (e.g. max-len=256,ratio=3,dedup)")
            if key == "dedup":
                if value:
                    raise InputError(f"--filter {item!r}: dedup takes no value")
                values["dedup"] = True
                continue
            try:
                number = float(value) if key == "ratio" else int(value)
            except ValueError:
                number = None
            if number is None or number <= 0 or (key == "ratio" and number < 1):
                want = "a number >= 1" if key == "ratio" else "a positive whole number of tokens"
                raise InputError(f"--filter {item!r}: {key} takes {want}, got {value!r}")
            values[key.replace("-", "_")] = number
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return {"max_len": self.max_len, "ratio": self.ratio, "dedup": self.dedup,
                "truncate": self.truncate}


@dataclass(frozen=True)
class PrepareRequest:
    """What to prepare: training corpora (source, target file pairs) with optional ``weights``,
    optional validation pairs, the tokenizer (``tokenizer_from`` a run or model directory, or
    trained: ``vocab_size`` pieces on a sample of ``tokenizer_sample`` sentences), ``filters``,
    ``workers`` processes (default: every core) and the ``out`` directory. ``command`` is recorded
    in the manifest."""

    train: Sequence[tuple[str, str]]
    out: str
    weights: Sequence[float] | None = None
    valid: Sequence[tuple[str, str]] = ()
    tokenizer_from: str | None = None
    vocab_size: int = 8000
    tokenizer_sample: int = 2_000_000
    joint: bool = True
    model_type: str = "bpe"
    byte_fallback: bool = True
    character_coverage: float = 0.9995
    seed: int = 0
    filters: Filters = field(default_factory=Filters)
    workers: int | None = None
    command: Sequence[str] = ()

    def check(self) -> None:
        """InputError for what can be refused before reading anything."""
        if not self.train:
            raise InputError("--train-src/--train-tgt: give at least one training corpus")
        if self.weights is not None:
            if len(self.weights) != len(self.train):
                raise InputError(f"--weights: {len(self.weights)} weights for {len(self.train)} "
                                 "training corpora; give one per corpus")
            bad = [w for w in self.weights if not (w > 0 and np.isfinite(w))]
            if bad:
                raise InputError(f"--weights: {bad[0]!r} is not a positive number")
        for split, pairs in (("train", self.train), ("valid", self.valid)):
            for src, tgt in pairs:
                for flag, path in ((f"--{split}-src", src), (f"--{split}-tgt", tgt)):
                    p = Path(path)
                    if not p.exists():
                        raise InputError(f"{path}: file not found ({flag})")
                    if not p.is_file():
                        raise InputError(f"{path}: not a file ({flag})")
        if self.workers is not None and self.workers < 1:
            raise InputError(f"--workers must be at least 1, got {self.workers}")
        if self.tokenizer_from is None:
            if self.vocab_size < 8:
                raise InputError(f"--vocab-size must be at least 8, got {self.vocab_size}")
            if self.tokenizer_sample < 1:
                raise InputError(f"--tokenizer-sample must be positive, got {self.tokenizer_sample}")
        out = Path(self.out)
        if out.exists() and (not out.is_dir() or (any(out.iterdir())
                                                  and not (out / MANIFEST).is_file())):
            raise InputError(f"{out}: exists and is not a prepared data directory; choose another "
                             "--out")


# ---------------------------------------------------------------------------------- reading


def iter_line_pairs(src: str, tgt: str) -> Iterator[tuple[str, str]]:
    """The line pairs of two aligned files, stripped; InputError naming the file and line where
    one ends before the other."""
    a, b = iter_file_lines(src), iter_file_lines(tgt)
    for number in itertools.count(1):
        x, y = next(a, None), next(b, None)
        if x is None and y is None:
            return
        if x is None or y is None:
            short, long = (src, tgt) if x is None else (tgt, src)
            raise InputError(f"{short} ends at line {number - 1} but {long} has a line {number}: "
                             "parallel files must have the same number of lines")
        yield x[1].strip(), y[1].strip()


def _chunks(pairs: Iterator[tuple[str, str]], size: int) -> Iterator[tuple[list[str], list[str]]]:
    while True:
        block = list(itertools.islice(pairs, size))
        if not block:
            return
        yield [s for s, _ in block], [t for _, t in block]


# ---------------------------------------------------------------------------------- encoding

# The worker processes' tokenizers and filters, set once by the pool's initializer (a process
# pool's per-process state; the main process encodes through the same function with its own).
_WORKER: dict[str, Any] = {}


def _init_worker(src_tok: Any, tgt_tok: Any, dtype: str) -> None:
    _WORKER.update(src=src_tok, tgt=tgt_tok, dtype=np.dtype(dtype))


def _flat(rows: list[list[int]], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=dtype, count=int(lengths.sum()))
    return ids, lengths


def encode_chunk(src: list[str], tgt: list[str], filters: Filters | None) -> dict[str, np.ndarray]:
    """Encode and filter (``filters``; None: only empty pairs) one chunk of stripped line pairs
    with the worker's tokenizers.

    Returns ``reason`` (per pair: 0 kept, else 1 + the index in :data:`REASONS`, dedup excepted),
    ``truncated`` (per pair), the kept pairs' flat ids and lengths per side, and with dedup their
    ``hash`` (64 bits of blake2b over both texts).
    """
    src_tok, tgt_tok = _WORKER["src"], _WORKER["tgt"]
    dtype = _WORKER["dtype"]
    n = len(src)
    reason = np.zeros(n, dtype=np.int8)
    text = [i for i in range(n) if src[i] and tgt[i]]
    reason[[i for i in range(n) if not (src[i] and tgt[i])]] = 1
    s_ids = src_tok.encode_batch([src[i] for i in text]) if text else []
    t_ids = tgt_tok.encode_batch([tgt[i] for i in text]) if text else []
    kept: list[int] = []
    rows_s: list[list[int]] = []
    rows_t: list[list[int]] = []
    truncated = np.zeros(n, dtype=bool)
    for i, s, t in zip(text, s_ids, t_ids, strict=True):
        ls, lt = len(s), len(t)
        if not ls or not lt:
            reason[i] = 2
            continue
        if filters is not None:
            if filters.max_len is not None and max(ls, lt) > filters.max_len:
                reason[i] = 3
                continue
            if filters.ratio is not None and max(ls, lt) > filters.ratio * min(ls, lt):
                reason[i] = 4
                continue
            if filters.truncate is not None and max(ls, lt) > filters.truncate:
                truncated[i] = True
                s, t = s[: filters.truncate], t[: filters.truncate]
        kept.append(i)
        rows_s.append(s)
        rows_t.append(t)
    out = {"reason": reason, "truncated": truncated, "kept": np.asarray(kept, dtype=np.int64)}
    out["src_ids"], out["src_len"] = _flat(rows_s, dtype)
    out["tgt_ids"], out["tgt_len"] = _flat(rows_t, dtype)
    if filters is not None and filters.dedup:
        out["hash"] = np.fromiter(
            (int.from_bytes(hashlib.blake2b(f"{len(src[i])}:{src[i]}{tgt[i]}".encode(), digest_size=8)
                            .digest(), "little") for i in kept), dtype=np.uint64, count=len(kept))
    return out


def _select(ids: np.ndarray, lengths: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of flat ``ids`` where ``keep`` is true."""
    return ids[np.repeat(keep, lengths)], lengths[keep]


class _Encoder:
    """Runs :func:`encode_chunk` over chunks, in order, in a pool of ``workers`` processes (or
    here for one), with at most two chunks per worker in flight."""

    def __init__(self, workers: int, init: tuple[Any, ...]) -> None:
        self.workers = workers
        self.init = init
        self.pool = None
        if workers > 1:
            # spawn: a fork of a process that has started PyTorch's threads can hang
            self.pool = get_context("spawn").Pool(workers, initializer=_init_worker, initargs=init)
        else:
            _init_worker(*init)

    def run(self, chunks: Iterator[tuple[list[str], list[str]]],
            filters: Filters | None) -> Iterator[dict[str, np.ndarray]]:
        if self.pool is None:
            for src, tgt in chunks:
                yield encode_chunk(src, tgt, filters)
            return
        pending: deque = deque()
        for src, tgt in chunks:
            pending.append(self.pool.apply_async(encode_chunk, (src, tgt, filters)))
            if len(pending) >= 2 * self.workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None


# ---------------------------------------------------------------------------------- the stages


def _stage(name: str, began: float, what: str) -> None:
    log.info("prepare: %s: %s (%.1fs)", name, what, time.perf_counter() - began)


def _inputs(request: PrepareRequest) -> list[dict[str, Any]]:
    out = []
    for split, pairs in (("train", request.train), ("valid", request.valid)):
        for index, (src, tgt) in enumerate(pairs):
            for side, path in zip(SIDES, (src, tgt), strict=True):
                p = Path(path)
                out.append({"split": split, "corpus": index, "side": side,
                            "path": str(p.resolve()), "size": p.stat().st_size,
                            "sha256": file_sha256(p)})
    return out


def _tokenizer_key(request: PrepareRequest) -> dict[str, Any]:
    if request.tokenizer_from is not None:
        folder = _tokenizer_folder(request.tokenizer_from)
        return {"from": str(Path(request.tokenizer_from).resolve()), "sha256": folder_sha256(folder)}
    return {"vocab_size": request.vocab_size, "sample": request.tokenizer_sample,
            "joint": request.joint, "model_type": request.model_type,
            "byte_fallback": request.byte_fallback,
            "character_coverage": request.character_coverage, "seed": request.seed}


def _tokenizer_folder(run_dir: str) -> Path:
    from transformer.atomic import existing_dir
    from transformer.data.tokenizer_pair import INDEX_FILE

    path = Path(run_dir)
    if (path / INDEX_FILE).is_file():
        return path
    folder = existing_dir(path / TOKENIZER_DIR)
    if folder is None:
        raise InputError(f"--tokenizer-from {run_dir}: no tokenizer/ folder (expected a run or "
                         "model directory, or a prepared data directory)")
    return folder


def _sentences(request: PrepareRequest, side: int | None) -> Iterator[str]:
    """Every non-empty training pair's sentences: both sides (``side`` None) or one."""
    for src, tgt in request.train:
        for pair in iter_line_pairs(src, tgt):
            if pair[0] and pair[1]:
                if side is None:
                    yield pair[0]
                    yield pair[1]
                else:
                    yield pair[side]


def _train_tokenizers(request: PrepareRequest) -> tuple[Any, Any, int]:
    """Tokenizers trained on a reservoir sample of the training text (one pass per tokenizer)."""
    from transformer.data.tokenizer import Tokenizer

    options = dict(vocab_size=request.vocab_size, model_type=request.model_type,
                   byte_fallback=request.byte_fallback,
                   character_coverage=request.character_coverage,
                   sample_size=request.tokenizer_sample, seed=request.seed)
    if request.joint:
        counter = _Count(_sentences(request, None))
        tok = Tokenizer.train(counter, **options)
        return tok, tok, counter.count
    counter = _Count(_sentences(request, 0))
    src = Tokenizer.train(counter, **options)
    tgt = Tokenizer.train(_sentences(request, 1), **options)
    return src, tgt, 2 * counter.count


class _Count:
    def __init__(self, items: Iterator[str]) -> None:
        self.items, self.count = items, 0

    def __iter__(self) -> Iterator[str]:
        for item in self.items:
            self.count += 1
            yield item


def _bar(progress: bool, what: str, total: int | None) -> Any:
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=what, unit=" pairs", unit_scale=True, file=sys.stderr,
                dynamic_ncols=True)


def _remember(chunks: Iterator[tuple[list[str], list[str]]],
              held: deque) -> Iterator[tuple[list[str], list[str]]]:
    """``chunks``, each one's target lines appended to ``held`` as it goes out."""
    for chunk in chunks:
        held.append(chunk[1])
        yield chunk


def _encode_split(tmp: Path, split: str, pairs: Sequence[tuple[str, str]], encoder: _Encoder,
                  *, dtype: np.dtype, filters: Filters | None,
                  progress: bool) -> list[dict[str, Any]]:
    """Encode every corpus of ``split`` into ``tmp``; the corpora's manifest entries."""
    seen = SeenHashes()
    infos = []
    for index, (src_path, tgt_path) in enumerate(pairs):
        began = time.perf_counter()
        folder = corpus_dir(tmp, split, index)
        writers = {side: ShardWriter(folder, side, dtype) for side in SIDES}
        references = open(folder / REFERENCES, "w", encoding="utf-8") if split == "valid" else None  # noqa: SIM115
        dropped = dict.fromkeys(REASONS, 0)
        lines = truncated = 0
        bar = _bar(progress, f"{split} {Path(src_path).name}", None)
        chunks = _chunks(iter_line_pairs(src_path, tgt_path), CHUNK_PAIRS)
        held: deque = deque()  # validation keeps its references' text: each chunk's targets
        if references is not None:
            chunks = _remember(chunks, held)
        try:
            for out in encoder.run(chunks, filters):
                n = len(out["reason"])
                lines += n
                counts = np.bincount(out["reason"], minlength=len(REASONS) + 1)
                for code, name in enumerate(REASONS, start=1):
                    dropped[name] += int(counts[code])
                s_ids, s_len, t_ids, t_len = (out["src_ids"], out["src_len"], out["tgt_ids"],
                                              out["tgt_len"])
                kept = out["kept"]
                if filters is not None and filters.dedup:
                    fresh = seen.add(out["hash"])
                    if not fresh.all():
                        dropped["dedup"] += int((~fresh).sum())
                        s_ids, s_len = _select(s_ids, s_len, fresh)
                        t_ids, t_len = _select(t_ids, t_len, fresh)
                        kept = kept[fresh]
                truncated += int(out["truncated"][kept].sum())
                writers["src"].append(s_ids, s_len)
                writers["tgt"].append(t_ids, t_len)
                if references is not None:
                    tgt_lines = held.popleft()
                    references.write("".join(tgt_lines[i] + "\n" for i in kept.tolist()))
                if bar is not None:
                    bar.update(n)
        finally:
            for w in writers.values():
                w.close()
            if references is not None:
                references.close()
            if bar is not None:
                bar.close()
        if writers["src"].rows == 0:
            raise InputError(f"{src_path} and {tgt_path}: no line pair is left to train on "
                             f"({lines} lines read; dropped {_counts(dropped)})")
        info = {"name": f"{Path(src_path).name} + {Path(tgt_path).name}", "src": str(src_path),
                "tgt": str(tgt_path), "lines": lines, "pairs": writers["src"].rows,
                "tokens": {side: writers[side].tokens for side in SIDES},
                "dropped": dropped, "truncated": truncated}
        infos.append(info)
        _stage(f"encode {split} {index}", began,
               f"{info['name']}: {lines:,} line pairs -> {info['pairs']:,} kept, "
               f"{info['tokens']['src']:,}+{info['tokens']['tgt']:,} tokens; dropped "
               f"{_counts(dropped)}; truncated {truncated:,}")
    return infos


def _counts(dropped: dict[str, int]) -> str:
    parts = [f"{name} {count:,}" for name, count in dropped.items() if count]
    return ", ".join(parts) if parts else "none"


def _request_key(request: PrepareRequest, inputs: list[dict[str, Any]]) -> dict[str, Any]:
    """Everything the directory's content depends on: equal keys, equal directories."""
    return {"format_version": FORMAT_VERSION, "inputs": inputs,
            "weights": None if request.weights is None else [float(w) for w in request.weights],
            "tokenizer": _tokenizer_key(request), "filters": request.filters.to_dict()}


def _current_key(out: Path) -> dict[str, Any] | None:
    try:
        return json.loads((out / MANIFEST).read_text(encoding="utf-8")).get("request")
    except (OSError, ValueError, AttributeError):
        return None


def prepare(request: PrepareRequest, *, progress: bool = False) -> dict[str, Any]:
    """Write the prepared data directory ``request.out``; returns a summary (``up_to_date`` when
    the directory was already prepared from the same inputs and options)."""
    request.check()
    out = Path(request.out)
    began = time.perf_counter()
    inputs = _inputs(request)
    _stage("inputs", began, f"{len(inputs)} files, {sum(i['size'] for i in inputs):,} bytes hashed")
    key = _request_key(request, inputs)
    if _current_key(out) == key:
        log.info("prepare: %s is up to date with its inputs and options; nothing to do", out)
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
        return {**_summary(out, manifest), "up_to_date": True}
    workers = request.workers or os.cpu_count() or 1
    manifest: dict[str, Any] = {}

    def fill(tmp: Path) -> None:
        began = time.perf_counter()
        if request.tokenizer_from is not None:
            from transformer.data.tokenizer_pair import load_tokenizers

            shutil.copytree(_tokenizer_folder(request.tokenizer_from), tmp / TOKENIZER_DIR)
            src_tok, tgt_tok = load_tokenizers(tmp / TOKENIZER_DIR)
            sampled = 0
            _stage("tokenizer", began, f"from {request.tokenizer_from}: {src_tok.vocab_size:,}"
                   f"/{tgt_tok.vocab_size:,} pieces")
        else:
            from transformer.data.tokenizer_pair import save_tokenizers

            src_tok, tgt_tok, seen = _train_tokenizers(request)
            sampled = min(seen, request.tokenizer_sample * (1 if request.joint else 2))
            save_tokenizers(src_tok, tgt_tok, tmp / TOKENIZER_DIR)
            _stage("tokenizer", began, f"{'joint ' if request.joint else ''}{request.model_type} "
                   f"vocabulary of {src_tok.vocab_size:,} pieces trained on {sampled:,} of "
                   f"{seen:,} sentences")
        dtype = id_dtype(max(src_tok.vocab_size, tgt_tok.vocab_size))
        splits = {}
        encoder = _Encoder(min(workers, 64), (src_tok, tgt_tok, dtype.str))
        try:
            for split, pairs in (("train", request.train), ("valid", request.valid)):
                if pairs:
                    splits[split] = _encode_split(
                        tmp, split, pairs, encoder, dtype=dtype, progress=progress,
                        filters=request.filters if split == "train" else None)
        finally:
            encoder.close()
        manifest.update({
            "format_version": FORMAT_VERSION,
            "command": list(request.command),
            "inputs": inputs,
            "tokenizer": {**key["tokenizer"], "folder_sha256": folder_sha256(tmp / TOKENIZER_DIR),
                          "src_vocab_size": src_tok.vocab_size,
                          "tgt_vocab_size": tgt_tok.vocab_size, "sampled_sentences": sampled},
            "id_dtype": dtype.str,
            "filters": request.filters.to_dict(),
            "weights": key["weights"],
            "splits": splits,
            "request": key,
        })
        atomic_write_text(tmp / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")

    began = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    replace_dir(out, fill)
    _stage("written", began, str(out))
    return {**_summary(out, manifest), "up_to_date": False}


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
