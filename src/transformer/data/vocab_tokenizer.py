"""A tokenizer whose ids come from a vocabulary list, not from its SentencePiece model.

Marian/OPUS-MT models segment the source and the target with two SentencePiece models
(``source.spm``, ``target.spm``) and number the pieces through one shared vocabulary file
(``vocab.json``); a piece missing from the vocabulary is ``<unk>``, and the source ends with
``</s>``. :class:`VocabTokenizer` does exactly that, with the project's special ids (PAD 0, UNK 1,
BOS 2, EOS 3) at the front of the vocabulary, so every verb treats it like :class:`Tokenizer`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

from transformer.atomic import atomic_write_bytes
from transformer.data.text_files import read_json
from transformer.data.tokenizer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIAL_IDS,
    SPECIAL_PIECES,
    UNK_ID,
    checked_ids,
)
from transformer.errors import InputError, first_line


class VocabTokenizer:
    """SentencePiece segmentation, ids from ``vocabulary`` (piece of id i at index i).

    ``vocabulary[0:4]`` must be the special pieces ``<pad> <unk> <s> </s>``. ``append_eos`` ends
    every encoded text with EOS (a Marian source side).
    """

    def __init__(self, model_proto: bytes, vocabulary: Sequence[str], *, append_eos: bool = False,
                 source: str = "<memory>") -> None:
        processor = spm.SentencePieceProcessor()
        try:
            processor.LoadFromSerializedProto(model_proto)
        except (RuntimeError, OSError) as err:
            raise InputError(f"{source}: not a SentencePiece model ({first_line(err)})") from None
        specials = [SPECIAL_PIECES[k] for k in ("pad", "unk", "bos", "eos")]
        if list(vocabulary[:4]) != specials:
            raise InputError(f"{source}: the vocabulary must start with {specials}, got "
                             f"{list(vocabulary[:4])}")
        self._sp = processor
        self._proto = bytes(model_proto)
        self.vocabulary = list(vocabulary)
        self._ids = {piece: i for i, piece in enumerate(self.vocabulary)}
        if len(self._ids) != len(self.vocabulary):
            raise InputError(f"{source}: the vocabulary lists a piece twice")
        self.append_eos = bool(append_eos)

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` (with EOS at the end when ``append_eos``), without BOS."""
        pieces = self._sp.encode(text, out_type=str)
        ids = [self._ids.get(p, UNK_ID) for p in pieces]
        return [*ids, EOS_ID] if self.append_eos else ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``, skipping PAD, UNK, BOS and EOS."""
        kept = checked_ids(ids, self.vocab_size, skipped=SPECIAL_IDS)
        return self._sp.decode_pieces([self.vocabulary[i] for i in kept])

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        return [self.decode(ids) for ids in batch]

    def id_to_piece(self, i: int) -> str:
        (i,) = checked_ids([i], self.vocab_size)
        return self.vocabulary[i]

    def piece_to_id(self, piece: str) -> int:
        return self._ids.get(piece, UNK_ID)

    def all_pieces(self) -> list[str]:
        """Every piece, by id."""
        return list(self.vocabulary)

    def pieces(self, text: str) -> list[str]:
        return [self.vocabulary[i] for i in self.encode(text)]

    # ------------------------------------------------------------------ storage
    def save(self, directory: str | os.PathLike[str], name: str) -> Path:
        """Write ``<name>.model`` (the SentencePiece model); the vocabulary is saved once for a
        pair by :func:`transformer.data.tokenizer_pair.save_tokenizers`."""
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError(f"tokenizer name must be a plain file name, got {name!r}")
        path = Path(directory) / f"{name}.model"
        atomic_write_bytes(path, self._proto)
        return path

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, VocabTokenizer) and other._proto == self._proto
                and other.vocabulary == self.vocabulary and other.append_eos == self.append_eos)

    def __hash__(self) -> int:
        return hash((self._proto, len(self.vocabulary), self.append_eos))

    def __getstate__(self) -> dict:
        return {"proto": self._proto, "vocabulary": self.vocabulary, "append_eos": self.append_eos}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["proto"], state["vocabulary"], append_eos=state["append_eos"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"VocabTokenizer(vocab_size={self.vocab_size}, append_eos={self.append_eos})"


def read_vocabulary(path: Path) -> list[str]:
    """A vocabulary file written by :func:`save_vocabulary`: a JSON list of pieces."""
    data = read_json(path, what="vocabulary", missing="vocabulary not found")
    if not isinstance(data, list) or not all(isinstance(p, str) for p in data):
        raise InputError(f"{path}: the vocabulary must be a JSON list of strings")
    return data


def save_vocabulary(vocabulary: Sequence[str], path: Path) -> None:
    atomic_write_bytes(path, (json.dumps(list(vocabulary), ensure_ascii=False) + "\n").encode())


__all__ = ["BOS_ID", "EOS_ID", "PAD_ID", "UNK_ID", "VocabTokenizer", "read_vocabulary",
           "save_vocabulary"]
