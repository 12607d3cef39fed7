"""The prepared data directory: what ``transformer prepare`` writes and ``train --data-dir`` reads.

    DATA_DIR/
      manifest.json          format version, inputs (path, size, sha256), tokenizer hash, filters
                             and counts, weights, the command
      tokenizer/             the SentencePiece model(s), as in a model directory
      train/c0/, train/c1/   one folder per corpus, in the order given
        src.ids, tgt.ids     token ids of every kept pair, concatenated (no BOS/EOS); uint16 when
                             the vocabulary has fewer than 65,536 pieces, else uint32
        src.offsets, ...     int64, one more than the pairs: pair i is ids[offsets[i]:offsets[i+1]]
        src.lengths, ...     int32, one per pair (what batching sorts by, read without the ids)
      valid/c0/              the same, plus tgt.txt: the kept references as text (for BLEU)

Everything is read through ``numpy.memmap``: opening a directory of millions of pairs reads the
manifest and the length files, and every process on a machine (DDP ranks) shares the page cache
instead of holding its own copy.

    data = PreparedData.open("data/wmt14")
    pairs = data.pairs("train", max_len=256, on_long="truncate")   # what the batches index
    src_ids, tgt_ids = pairs[0]                                    # lists of ints
    epochs = MixedEpochs(pairs, weights=data.weights, collate=collate_pairs, max_tokens=4096)
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from transformer.data.epoch_batches import ArrayBatches
from transformer.data.token_batch_sampler import TokenBatchSampler
from transformer.errors import InputError

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
TOKENIZER_DIR = "tokenizer"
SPLITS = ("train", "valid")
SIDES = ("src", "tgt")
OFFSET_DTYPE = np.dtype("<i8")
LENGTH_DTYPE = np.dtype("<i4")
REFERENCES = "tgt.txt"

BatchT = TypeVar("BatchT")
Pair = tuple[list[int], list[int]]


def id_dtype(vocab_size: int) -> np.dtype:
    """The id file's type for a vocabulary of ``vocab_size`` pieces: uint16 below 65,536."""
    return np.dtype("<u2") if vocab_size < 1 << 16 else np.dtype("<u4")


def corpus_dir(root: Path, split: str, index: int) -> Path:
    """``root/split/c{index}``: the folder of one corpus of a split."""
    return root / split / f"c{index}"


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


class ShardWriter:
    """Appends the id rows of one side of one corpus: ids, offsets and lengths, streamed to disk
    (nothing is kept in memory beyond the chunk being written)."""

    def __init__(self, folder: Path, side: str, dtype: np.dtype) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.dtype = dtype
        self._ids = open(folder / f"{side}.ids", "wb")  # noqa: SIM115 - closed in close()
        self._offsets = open(folder / f"{side}.offsets", "wb")  # noqa: SIM115
        self._lengths = open(folder / f"{side}.lengths", "wb")  # noqa: SIM115
        self._offsets.write(np.zeros(1, dtype=OFFSET_DTYPE).tobytes())
        self.rows = 0
        self.tokens = 0

    def append(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        """Add ``len(lengths)`` rows whose ids are ``ids`` (flat, row after row)."""
        if int(lengths.sum()) != len(ids):
            raise ValueError(f"{len(ids)} ids for rows of {int(lengths.sum())} tokens")
        self._ids.write(np.ascontiguousarray(ids, dtype=self.dtype).tobytes())
        ends = self.tokens + np.cumsum(lengths, dtype=np.int64)
        self._offsets.write(ends.astype(OFFSET_DTYPE).tobytes())
        self._lengths.write(np.asarray(lengths, dtype=LENGTH_DTYPE).tobytes())
        self.rows += len(lengths)
        self.tokens += len(ids)

    def close(self) -> None:
        for f in (self._ids, self._offsets, self._lengths):
            f.close()


def _memmap(path: Path, dtype: np.dtype, count: int) -> np.ndarray:
    """``count`` items of ``dtype`` from ``path``, memory-mapped; InputError when the file is
    missing or its size is not what the manifest says."""
    if not path.is_file():
        raise InputError(f"{path}: missing from the prepared data directory")
    size = path.stat().st_size
    if size != count * dtype.itemsize:
        raise InputError(f"{path}: {size} bytes, the manifest says {count} items of "
                         f"{dtype.itemsize} bytes; prepare the directory again")
    if count == 0:
        return np.zeros(0, dtype=dtype)
    # a plain ndarray view of the map (it keeps the map open): slicing np.memmap itself costs
    # several times more per pair, which a batch of hundreds of pairs pays
    return np.asarray(np.memmap(path, dtype=dtype, mode="r", shape=(count,)))


class Shard:
    """One side of one corpus, read back: row i is ``ids[offsets[i]:offsets[i+1]]``."""

    def __init__(self, folder: Path, side: str, *, rows: int, tokens: int, dtype: np.dtype) -> None:
        self.ids = _memmap(folder / f"{side}.ids", dtype, tokens)
        self.offsets = _memmap(folder / f"{side}.offsets", OFFSET_DTYPE, rows + 1)
        self.lengths = _memmap(folder / f"{side}.lengths", LENGTH_DTYPE, rows)
        if rows and (int(self.offsets[-1]) != tokens or int(self.offsets[0]) != 0):
            raise InputError(f"{folder / (side + '.offsets')}: offsets do not span the ids; "
                             "prepare the directory again")

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index: int) -> np.ndarray:
        return self.ids[self.offsets[index] : self.offsets[index + 1]]


@dataclass
class PreparedCorpus:
    """One corpus of a split: its two sides and what the manifest says about it."""

    name: str
    src: Shard
    tgt: Shard
    info: dict[str, Any]

    def __len__(self) -> int:
        return len(self.src)


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


class PreparedPairs(Sequence[Pair]):
    """The pairs of a split's corpora, one after the other, fitted to a model of ``max_len``
    positions as :func:`~transformer.data.encoding.encode_pairs` fits them: a source longer than
    ``max_len`` or a target longer than ``max_len - 1`` is cut (``on_long="truncate"``) or left out
    (``"filter"``), counted in ``num_truncated``/``num_filtered``.

    ``self[i]`` is ``(src_ids, tgt_ids)`` as lists of ints, read from the memory maps;
    ``lengths`` is an (N, 2) array of (src_len, tgt_len) after the cut, ``corpus`` (N,) says which
    corpus each pair is from and ``sizes`` how many pairs each corpus has.
    """

    def __init__(self, corpora: list[PreparedCorpus], *, max_len: int, on_long: str,
                 name: str = "") -> None:
        if on_long not in ("truncate", "filter"):
            raise ValueError(f"on_long must be one of ('truncate', 'filter'), got {on_long!r}")
        self.corpora = corpora
        self.name = name
        self.max_src, self.max_tgt = max_len, max_len - 1
        parts, index, corpus = [], [], []
        self.num_truncated = self.num_filtered = 0
        for k, c in enumerate(corpora):
            src = np.asarray(c.src.lengths, dtype=np.int64)
            tgt = np.asarray(c.tgt.lengths, dtype=np.int64)
            long = (src > self.max_src) | (tgt > self.max_tgt)
            keep = np.arange(len(src))
            if on_long == "filter":
                keep = np.flatnonzero(~long)
                self.num_filtered += int(long.sum())
            else:
                self.num_truncated += int(long.sum())
            parts.append(np.stack([np.minimum(src[keep], self.max_src),
                                   np.minimum(tgt[keep], self.max_tgt)], axis=1))
            index.append(keep)
            corpus.append(np.full(len(keep), k, dtype=np.int16))
        self.lengths = np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)
        self._row = np.concatenate(index) if index else np.zeros(0, dtype=np.int64)
        self.corpus = np.concatenate(corpus) if corpus else np.zeros(0, dtype=np.int16)
        self.sizes = np.bincount(self.corpus, minlength=len(corpora))
        if self.num_truncated:
            log.warning("%s: truncated %d of %d pairs to max_len=%d", name, self.num_truncated,
                        len(self), max_len)
        if self.num_filtered:
            log.warning("%s: dropped %d pairs longer than max_len=%d", name, self.num_filtered,
                        max_len)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index):  # type: ignore[override]
        corpus = self.corpora[self.corpus[index]]
        row = self._row[index]
        src, tgt = corpus.src, corpus.tgt
        s0, s1 = src.offsets[row : row + 2].tolist()
        t0, t1 = tgt.offsets[row : row + 2].tolist()
        return (src.ids[s0 : min(s1, s0 + self.max_src)].tolist(),
                tgt.ids[t0 : min(t1, t0 + self.max_tgt)].tolist())

    @property
    def widths(self) -> np.ndarray:
        """Per pair ``max(src_len, tgt_len) + 1``: its cost per sentence in a batch."""
        return self.lengths.max(axis=1) + 1 if len(self) else np.zeros(0, dtype=np.int64)


def mixture(sizes: Sequence[int], weights: Sequence[float] | None, *, seed: int,
            epoch: int) -> np.ndarray | None:
    """The pair indices one epoch draws when corpora of ``sizes`` pairs (laid one after the
    other) are mixed by ``weights``; None without weights (every pair once).

    An epoch holds as many pairs as all corpora together, of which corpus k gives
    ``round(total * w_k / sum(w))``: every one of its pairs as often as that holds it whole, and
    the rest drawn without replacement (seeded by ``seed`` and the epoch, so a resumed run draws
    the same). A corpus weighed above its size is repeated, one below it is subsampled.
    """
    if weights is None:
        return None
    sizes = [int(s) for s in sizes]
    total = sum(sizes)
    share = np.asarray(weights, dtype=np.float64) / float(sum(weights))
    rng = np.random.default_rng([seed, epoch, 7])
    start = 0
    parts = []
    for size, w in zip(sizes, share, strict=True):
        want = int(round(total * w))
        if size and want:
            whole, rest = divmod(want, size)
            base = np.arange(start, start + size, dtype=np.int64)
            parts.append(np.tile(base, whole))
            if rest:
                parts.append(start + np.sort(rng.choice(size, rest, replace=False)))
        start += size
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


class MixedEpochs(Generic[BatchT]):
    """The Trainer's training data from prepared pairs: per epoch this rank's token-budget
    batches, planned as arrays (:meth:`TokenBatchSampler.plan`), corpora mixed by ``weights``
    (:func:`mixture`).

    Without weights every pair is in every epoch exactly once and the batches are those of
    :class:`~transformer.data.epoch_batches.Epochs` over the same lengths and seed. With weights each
    epoch draws its pairs first, then plans them; the ranks draw alike (same seed and epoch), so
    together they still see each drawn pair exactly once.
    """

    def __init__(self, pairs: PreparedPairs, *, weights: Sequence[float] | None,
                 collate: Callable[[list[Pair]], BatchT], max_tokens: int,
                 max_sentences: int | None = None, seed: int = 0, rank: int = 0,
                 world_size: int = 1) -> None:
        if weights is not None and len(weights) != len(pairs.sizes):
            raise ValueError(f"{len(weights)} weights for {len(pairs.sizes)} corpora")
        self.pairs, self.weights, self.collate = pairs, weights, collate
        self.options = dict(max_tokens=max_tokens, max_sentences=max_sentences, shuffle=True,
                            seed=seed, rank=rank, world_size=world_size)
        self.seed = seed
        self._sampler = TokenBatchSampler(pairs.lengths, **self.options) if weights is None else None

    def drawn(self, epoch: int) -> np.ndarray:
        """The pair indices of ``epoch`` before batching (all pairs, once, without weights)."""
        chosen = mixture(self.pairs.sizes, self.weights, seed=self.seed, epoch=epoch)
        return np.arange(len(self.pairs)) if chosen is None else chosen

    def plan(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """This rank's batches of ``epoch`` as ``(pair indices, bounds)``."""
        if self._sampler is not None:
            self._sampler.set_epoch(epoch)
            return self._sampler.plan()
        chosen = self.drawn(epoch)
        sampler = TokenBatchSampler(self.pairs.lengths[chosen], **self.options)
        sampler.set_epoch(epoch)
        indices, bounds = sampler.plan()
        return chosen[indices], bounds

    def for_epoch(self, epoch: int) -> ArrayBatches[BatchT]:
        return ArrayBatches(*self.plan(epoch), self._collate)

    def _collate(self, indices: list[int]) -> BatchT:
        return self.collate([self.pairs[i] for i in indices])

    def __len__(self) -> int:
        """Batches per epoch on this rank (of epoch 0 when weights make it vary a little)."""
        return len(self.plan(0)[1]) - 1
