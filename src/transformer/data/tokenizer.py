"""SentencePiece subword tokenizers (BPE or unigram), trained in memory and saved with the model.

The four special ids are fixed for every tokenizer the project makes and checked on every load:

    PAD_ID = 0 (<pad>), UNK_ID = 1 (<unk>), BOS_ID = 2 (<s>), EOS_ID = 3 (</s>)

What round-trips. Tokenizers are trained with ``normalization_rule_name="identity"`` (no Unicode
normalisation), ``remove_extra_whitespaces=False`` and ``byte_fallback=True`` (a character outside
the vocabulary becomes its UTF-8 bytes, never ``<unk>``), so for every Python string ``text`` that
is valid Unicode::

    tok.decode(tok.encode(text)) == text

exactly: whitespace runs, leading and trailing spaces, tabs, newlines, control characters, any
script (a string holding a lone surrogate is not valid Unicode and is refused with ValueError).
The data readers strip each line of surrounding whitespace before encoding, so a corpus line
comes back as ``line.strip()``. SentencePiece itself writes spaces as U+2581 (``▁``) and would
decode a literal U+2581 as a space; :meth:`Tokenizer.encode` encodes a literal U+2581 as its three UTF-8 bytes instead, so it
round-trips too. (With ``byte_fallback=False``, characters outside the vocabulary become
``<unk>``, which :meth:`Tokenizer.decode` shows as SentencePiece's ``⁇``.)

A translation model's source/target pair (joint or not) and its ``tokenizer/`` folder are in
:mod:`transformer.data.tokenizer_pair`.
"""

from __future__ import annotations

import io
import logging
import os
import random
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm

from transformer.atomic import atomic_write_bytes
from transformer.errors import InputError, first_line

log = logging.getLogger(__name__)

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
SPECIAL_IDS = frozenset((PAD_ID, UNK_ID, BOS_ID, EOS_ID))
SPECIAL_PIECES = {"pad": "<pad>", "unk": "<unk>", "bos": "<s>", "eos": "</s>"}
MODEL_TYPES = ("bpe", "unigram", "char", "word")
MEMO_TEXTS = 4096  # texts whose ids encode keeps (a file window is 2,048 lines)

_META = "\u2581"  # SentencePiece's visible space
_SENTINELS = tuple(chr(c) for c in range(0xF0000, 0xF0010))  # private use, 4 UTF-8 bytes each


class Tokenizer:
    """A SentencePiece model with the project's fixed special ids.

    Make one with :meth:`train`, :meth:`load` or :meth:`from_bytes`. ``encode`` gives ids without
    BOS/EOS; ``decode`` skips PAD, BOS and EOS. Picklable (for DataLoader workers).
    """

    def __init__(self, model_proto: bytes, *, source: str = "<memory>") -> None:
        processor = spm.SentencePieceProcessor()
        try:
            processor.LoadFromSerializedProto(model_proto)
        except (RuntimeError, OSError) as err:
            raise InputError(f"{source}: not a SentencePiece model ({first_line(err)})") from None
        found = {
            "pad": processor.pad_id(),
            "unk": processor.unk_id(),
            "bos": processor.bos_id(),
            "eos": processor.eos_id(),
        }
        expected = {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID}
        if found != expected:
            raise InputError(
                f"{source}: special ids {found} differ from the fixed {expected}; "
                "train tokenizers with transformer.data.tokenizer"
            )
        self._sp = processor
        self._sampler: Any = None  # a SegmentationSampler, made on the first sample_batch
        self._memo: dict[str, tuple[int, ...]] = {}  # text -> ids, the last MEMO_TEXTS (encode)
        self._proto = bytes(model_proto)
        self._init_byte_ids()

    def _init_byte_ids(self) -> None:
        """Byte-piece ids used to encode a literal U+2581 exactly (empty without byte fallback)."""
        self._byte_ids: dict[int, int] = {}
        for b in range(256):
            i = self._sp.piece_to_id(f"<0x{b:02X}>")
            if i == UNK_ID or not self._sp.is_byte(i):
                self._byte_ids = {}
                return
            self._byte_ids[b] = i

    # ------------------------------------------------------------------ training
    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        *,
        vocab_size: int,
        model_type: str = "bpe",
        character_coverage: float = 0.9995,
        byte_fallback: bool = True,
        sample_size: int | None = None,
        seed: int = 0,
        num_threads: int | None = None,
        user_defined_symbols: Sequence[str] = (),
    ) -> Tokenizer:
        """Train a tokenizer on ``texts`` (any iterable of sentences; empty ones are skipped).

        ``vocab_size`` counts everything, including the 4 special ids and, with ``byte_fallback``,
        the 256 byte pieces; ``model_type`` is "bpe" or "unigram" (SentencePiece's "char" and
        "word" also work; "char" takes as many pieces as there are characters, at most
        ``vocab_size``). ``sample_size`` trains on a random sample of that many sentences (seeded
        by ``seed``) for big corpora; ``None`` uses all. ``user_defined_symbols`` become pieces of
        their own (counted in ``vocab_size``), never split: source tags such as ``>>de<<``.
        Nothing is written to disk. Raises
        :class:`InputError` when the text cannot support ``vocab_size`` (naming the limit).
        """
        if model_type not in MODEL_TYPES:
            raise ValueError(f"model_type must be one of {MODEL_TYPES}, got {model_type!r}")
        if not isinstance(vocab_size, int) or vocab_size < 8:
            raise ValueError(f"vocab_size must be an integer >= 8, got {vocab_size!r}")
        if not 0.0 < character_coverage <= 1.0:
            raise ValueError(f"character_coverage must be in (0, 1], got {character_coverage}")
        began = time.perf_counter()
        if sample_size is not None:
            if sample_size < 1:
                raise ValueError(f"sample_size must be positive, got {sample_size}")
            texts = _reservoir_sample(texts, size=sample_size, seed=seed)
        counter = _Counter(texts)
        writer = io.BytesIO()
        options: dict[str, Any] = dict(
            sentence_iterator=iter(counter),
            model_writer=writer,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            byte_fallback=byte_fallback,
            normalization_rule_name="identity",
            remove_extra_whitespaces=False,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            pad_piece=SPECIAL_PIECES["pad"],
            unk_piece=SPECIAL_PIECES["unk"],
            bos_piece=SPECIAL_PIECES["bos"],
            eos_piece=SPECIAL_PIECES["eos"],
            num_threads=num_threads or min(os.cpu_count() or 1, 8),
            minloglevel=2,
            # sentences longer than this many bytes are skipped in training (not in encoding)
            max_sentence_length=1 << 16,
        )
        if user_defined_symbols:
            options["user_defined_symbols"] = list(user_defined_symbols)
        if model_type == "char":
            options["hard_vocab_limit"] = False
        try:
            spm.SentencePieceTrainer.train(**options)
        except RuntimeError as err:
            raise _training_error(err, vocab_size=vocab_size, count=counter.count) from None
        if counter.count == 0:
            raise InputError("cannot train a tokenizer: no non-empty text was given")
        tokenizer = cls(writer.getvalue())
        log.info("data: tokenizer: a %s model of %d pieces trained on %d sentences (%.1fs)",
                 model_type, tokenizer.vocab_size, counter.count, time.perf_counter() - began)
        return tokenizer

    # ------------------------------------------------------------------ encoding
    @property
    def vocab_size(self) -> int:
        """Number of ids, special ids included (the embedding size)."""
        return self._sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, without BOS or EOS. ValueError for a string that is not valid
        Unicode (a lone surrogate, as ``errors="surrogateescape"`` makes). The last few thousand
        texts' ids are kept: a line checked, fitted and translated is encoded once."""
        if (ids := self._memo.get(text) if isinstance(text, str) else None) is None:
            ids = self._encode_with_meta(text) if _META in text and self._byte_ids else self._sp_encode(text)
            if len(self._memo) >= MEMO_TEXTS:
                self._memo.clear()
            self._memo[text] = ids = tuple(ids)
        return list(ids)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode` for many texts at once (SentencePiece's C++ loop: much faster)."""
        texts = list(texts)
        out: list[list[int]] = self._sp_encode(texts) if texts else []
        if self._byte_ids:
            for i, text in enumerate(texts):
                if _META in text:
                    out[i] = self._encode_with_meta(text)
        return out

    def sample_batch(self, texts: Sequence[str], *, alpha: float, seed: int) -> list[list[int]]:
        """Sampled encodings of ``texts`` (subword regularization), the same ids for the same
        seed in any process: :func:`transformer.data.subword_sampling.sample_encodings`."""
        from transformer.data.subword_sampling import SegmentationSampler, sample_encodings

        if self._sampler is None:
            self._sampler = SegmentationSampler(self._sp)
        return sample_encodings(self, self._sampler, texts, alpha=alpha, seed=seed)

    def _sp_encode(self, text: str | list[str]) -> Any:
        try:
            return self._sp.encode(text)
        except (RuntimeError, TypeError):
            for i, one in enumerate([text] if isinstance(text, str) else text):
                if not isinstance(one, str):
                    raise TypeError(f"texts must be strings, got {type(one).__name__}") from None
                try:
                    one.encode("utf-8")
                except UnicodeEncodeError as err:
                    where = "" if isinstance(text, str) else f"text {i}: "
                    raise ValueError(
                        f"{where}not valid Unicode: {one[err.start]!r} at character {err.start} "
                        "(a lone surrogate)"
                    ) from None
            raise

    def _encode_with_meta(self, text: str) -> list[int]:
        """Encode a text holding U+2581 so that it decodes back to U+2581, not to a space.

        The character is swapped for a private-use sentinel that is absent from the text and the
        vocabulary, so SentencePiece spells the sentinel as its 4 UTF-8 byte pieces; those are
        then replaced by the byte pieces of U+2581 (UTF-8 is self-synchronising, so the 4-id run
        can only come from the sentinel).
        """
        for sentinel in _SENTINELS:
            if sentinel not in text and self._sp.piece_to_id(sentinel) == UNK_ID:
                break
        else:  # pragma: no cover - a text holding all 16 sentinels
            return self._sp_encode(text)
        ids = self._sp_encode(text.replace(_META, sentinel))
        pattern = [self._byte_ids[b] for b in sentinel.encode("utf-8")]
        meta = [self._byte_ids[b] for b in _META.encode("utf-8")]
        out: list[int] = []
        i = 0
        while i < len(ids):
            if ids[i : i + len(pattern)] == pattern:
                out.extend(meta)
                i += len(pattern)
            else:
                out.append(ids[i])
                i += 1
        return out

    def decode(self, ids: Iterable[int], *, unknown: bool = True) -> str:
        """The text of ``ids`` (a list or a 1-D tensor), skipping PAD, BOS and EOS. UNK shows as
        SentencePiece's `` ⁇ `` (spaces included), so that nothing is lost in silence;
        ``unknown=False`` drops it instead.

        Raises ValueError naming an id outside ``[0, vocab_size)``.
        """
        skipped = SPECIAL_IDS if not unknown else SPECIAL_IDS - {UNK_ID}
        return self._sp.decode(checked_ids(ids, self.vocab_size, skipped=skipped))

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        """:meth:`decode` for each row."""
        return [self.decode(ids) for ids in batch]

    def id_to_piece(self, i: int) -> str:
        """The piece string of id ``i`` (``▁`` marks a leading space; ``<0xE2>`` is a byte)."""
        return self._sp.id_to_piece(checked_ids([i], self.vocab_size)[0])

    def piece_to_id(self, piece: str) -> int:
        """The id of ``piece``, or UNK_ID when it is not in the vocabulary."""
        return self._sp.piece_to_id(piece)

    def all_pieces(self) -> list[str]:
        """Every piece, by id (:meth:`id_to_piece` of each, in one SentencePiece call)."""
        return list(self._sp.id_to_piece(list(range(self.vocab_size))))

    def pieces(self, text: str) -> list[str]:
        """The piece strings of ``encode(text)``: labels for attention maps."""
        return [self._sp.id_to_piece(i) for i in self.encode(text)]

    # ------------------------------------------------------------------ storage
    def to_bytes(self) -> bytes:
        """The serialized SentencePiece model."""
        return self._proto

    @classmethod
    def from_bytes(cls, data: bytes) -> Tokenizer:
        return cls(data)

    def save(self, directory: str | os.PathLike[str], name: str) -> Path:
        """Write ``directory/<name>.model`` atomically and return its path."""
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError(f"tokenizer name must be a plain file name, got {name!r}")
        path = Path(directory) / f"{name}.model"
        atomic_write_bytes(path, self._proto)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Tokenizer:
        """Load a ``.model`` file written by :meth:`save`; InputError when missing or corrupt."""
        path = Path(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise InputError(f"{path}: tokenizer model not found") from None
        except OSError as err:
            raise InputError(f"{path}: cannot read tokenizer model ({err.strerror})") from None
        return cls(data, source=str(path))

    def __getstate__(self) -> dict[str, bytes]:
        return {"proto": self._proto}

    def __setstate__(self, state: dict[str, bytes]) -> None:
        self.__init__(state["proto"])  # type: ignore[misc]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tokenizer) and other._proto == self._proto

    def __hash__(self) -> int:
        return hash(self._proto)

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size})"


def checked_ids(ids: Iterable[int], vocab_size: int, *,
                skipped: frozenset[int] | set[int] = frozenset()) -> list[int]:
    """``ids`` (a list or a 1-D tensor) as Python ints, each in ``[0, vocab_size)``, without those
    in ``skipped``: what every tokenizer's ``decode`` and ``id_to_piece`` read. ValueError names
    the first id outside."""
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    kept: list[int] = []
    for i in ids:
        i = int(i)
        if not 0 <= i < vocab_size:
            raise ValueError(f"token id {i} is outside the vocabulary [0, {vocab_size})")
        if i not in skipped:
            kept.append(i)
    return kept


def _reservoir_sample(texts: Iterable[str], *, size: int, seed: int) -> list[str]:
    """A uniform sample of ``size`` non-empty texts in one pass (Algorithm R), seeded."""
    rng = random.Random(seed)
    sample: list[str] = []
    seen = 0
    for text in texts:
        if not text:
            continue
        if seen < size:
            sample.append(text)
        else:
            j = rng.randrange(seen + 1)
            if j < size:
                sample[j] = text
        seen += 1
    return sample


class _Counter:
    """Iterates over non-empty texts (as SentencePiece's sentence_iterator) and counts them."""

    def __init__(self, texts: Iterable[str]) -> None:
        self._texts = texts
        self.count = 0

    def __iter__(self) -> Iterator[str]:
        for text in self._texts:
            if text:
                self.count += 1
                yield text


def _training_error(err: RuntimeError, *, vocab_size: int, count: int) -> InputError:
    """SentencePiece's trainer errors as one clear line."""
    message = str(err)
    if count == 0:
        return InputError("cannot train a tokenizer: no non-empty text was given")
    too_high = re.search(
        r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)", message
    )
    if too_high:
        return InputError(
            f"vocab_size={vocab_size} is too large for this text ({count} sentences): "
            f"at most {too_high.group(2)}"
        )
    too_small = re.search(
        r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)", message
    )
    if too_small:
        return InputError(
            f"vocab_size={vocab_size} is too small for this text: it needs at least "
            f"{too_small.group(2)} (special ids, byte pieces and characters)"
        )
    return InputError(f"tokenizer training failed: {first_line(err)}")
