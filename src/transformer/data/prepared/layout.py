"""The names, id types and format version of a prepared data directory's files.

    DATA_DIR/
      manifest.json          format version, inputs (path, size, sha256), tokenizer hash, filters
                             and counts, weights, tags (one per corpus, or null), the command
      tokenizer/             the SentencePiece model(s), as in a model directory
      train/c0/, train/c1/   one folder per corpus, in the order given
        src.ids, tgt.ids     token ids of every kept pair, concatenated (no BOS/EOS); uint16 when
                             the vocabulary has fewer than 65,536 pieces, else uint32
        src.offsets, ...     int64, one more than the pairs: pair i is ids[offsets[i]:offsets[i+1]]
        src.lengths, ...     int32, one per pair (what batching sorts by, read without the ids)
      valid/c0/              the same, plus tgt.txt: the kept references as text (for BLEU)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
TOKENIZER_DIR = "tokenizer"
SPLITS = ("train", "valid")
SIDES = ("src", "tgt")
OFFSET_DTYPE = np.dtype("<i8")
LENGTH_DTYPE = np.dtype("<i4")
REFERENCES = "tgt.txt"


def id_dtype(vocab_size: int) -> np.dtype:
    """The id file's type for a vocabulary of ``vocab_size`` pieces: uint16 below 65,536."""
    return np.dtype("<u2") if vocab_size < 1 << 16 else np.dtype("<u4")


def corpus_dir(root: Path, split: str, index: int) -> Path:
    """``root/split/c{index}``: the folder of one corpus of a split."""
    return root / split / f"c{index}"
