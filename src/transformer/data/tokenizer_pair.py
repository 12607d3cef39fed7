"""A translation model's source and target tokenizers: trained jointly or apart, and saved to or
read from the model directory's ``tokenizer/`` folder.

A joint tokenizer (one vocabulary for source and target, the default) is what shared embeddings
need; :func:`train_tokenizers` returns the same object twice for it.

On disk (the model directory's ``tokenizer/`` folder)::

    tokenizer.json      {"format_version": 1, "joint": true, "src": "joint.model", "tgt": "joint.model", ...}
    joint.model         or src.model and tgt.model: SentencePiece model protos
    vocab.json          only for models imported from Marian: ids from one vocabulary list, two
                        segmenters (:class:`~transformer.data.vocab_tokenizer.VocabTokenizer`)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from transformer.atomic import atomic_write_bytes
from transformer.data.text_files import read_json
from transformer.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer
from transformer.data.vocab_tokenizer import VocabTokenizer, read_vocabulary, save_vocabulary
from transformer.errors import InputError

FORMAT_VERSION = 1
INDEX_FILE = "tokenizer.json"
VOCAB_FILE = "vocab.json"

def train_tokenizers(
    src_texts: Iterable[str],
    tgt_texts: Iterable[str],
    *,
    vocab_size: int,
    joint: bool = True,
    model_type: str = "bpe",
    **options: Any,
) -> tuple[Tokenizer, Tokenizer]:
    """Train the source and target tokenizers of a translation model.

    ``joint=True`` trains one tokenizer on both sides and returns it twice (``src_tok is
    tgt_tok``): one vocabulary, as shared embeddings need. ``joint=False`` trains one per side,
    each with ``vocab_size`` pieces. ``options`` go to :meth:`Tokenizer.train`.
    """
    if joint:
        src_list = list(src_texts)
        tgt_list = list(tgt_texts)
        tok = Tokenizer.train(
            [*src_list, *tgt_list], vocab_size=vocab_size, model_type=model_type, **options
        )
        return tok, tok
    src_tok = Tokenizer.train(src_texts, vocab_size=vocab_size, model_type=model_type, **options)
    tgt_tok = Tokenizer.train(tgt_texts, vocab_size=vocab_size, model_type=model_type, **options)
    return src_tok, tgt_tok


def save_tokenizers(
    src_tok: Tokenizer, tgt_tok: Tokenizer, directory: str | os.PathLike[str]
) -> Path:
    """Write both tokenizers into ``directory`` (the model directory's ``tokenizer/`` folder).

    A joint pair (the same object, or equal models) is written once as ``joint.model``; otherwise
    ``src.model`` and ``tgt.model``. ``tokenizer.json`` says which, with the special ids and sizes.
    Returns ``directory``.
    """
    directory = Path(directory)
    joint = src_tok is tgt_tok or src_tok == tgt_tok
    if joint:
        files = {"src": src_tok.save(directory, "joint").name}
        files["tgt"] = files["src"]
    else:
        files = {
            "src": src_tok.save(directory, "src").name,
            "tgt": tgt_tok.save(directory, "tgt").name,
        }
    mapped = {}
    if isinstance(src_tok, VocabTokenizer) or isinstance(tgt_tok, VocabTokenizer):
        if not (isinstance(src_tok, VocabTokenizer) and isinstance(tgt_tok, VocabTokenizer)
                and src_tok.vocabulary == tgt_tok.vocabulary):
            raise ValueError("vocabulary-mapped tokenizers are saved in pairs over one vocabulary")
        save_vocabulary(src_tok.vocabulary, directory / VOCAB_FILE)
        mapped = {"vocabulary": VOCAB_FILE, "src_append_eos": src_tok.append_eos,
                  "tgt_append_eos": tgt_tok.append_eos}
    index = {
        "format_version": FORMAT_VERSION,
        "joint": joint,
        **files,
        **mapped,
        "src_vocab_size": src_tok.vocab_size,
        "tgt_vocab_size": tgt_tok.vocab_size,
        "special_ids": {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID},
    }
    text = json.dumps(index, indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(directory / INDEX_FILE, text.encode("utf-8"))
    return directory


def load_tokenizers(directory: str | os.PathLike[str]) -> tuple[Tokenizer, Tokenizer]:
    """Load what :func:`save_tokenizers` wrote: ``(src_tok, tgt_tok)``, the same object when joint.

    ``directory`` is the tokenizer folder or a model directory holding ``tokenizer/``. Raises
    :class:`InputError` when the folder, its index or a model is missing, corrupt or has other
    special ids.
    """
    directory = Path(directory)
    if not (directory / INDEX_FILE).exists() and (directory / "tokenizer" / INDEX_FILE).exists():
        directory = directory / "tokenizer"
    index_path = directory / INDEX_FILE
    if not directory.is_dir():
        raise InputError(f"{directory}: tokenizer folder not found")
    index = read_json(index_path, what="tokenizer index", missing="not found (not a tokenizer folder)")
    if not isinstance(index, dict) or not all(
        isinstance(index.get(k), str) for k in ("src", "tgt")
    ):
        raise InputError(f"{index_path}: tokenizer index lacks 'src' and 'tgt' model names")
    version = index.get("format_version")
    if version != FORMAT_VERSION:
        raise InputError(
            f"{index_path}: format_version {version!r} is not supported (expected {FORMAT_VERSION})"
        )
    for key in ("src", "tgt"):
        if Path(index[key]).name != index[key]:
            raise InputError(
                f"{index_path}: {key} model name {index[key]!r} is not a plain file name"
            )
    if "vocabulary" in index:
        return _load_mapped(directory, index, index_path)
    src_tok = Tokenizer.load(directory / index["src"])
    if index["tgt"] == index["src"]:
        return src_tok, src_tok
    return src_tok, Tokenizer.load(directory / index["tgt"])


def _load_mapped(directory: Path, index: dict, index_path: Path) -> tuple[Any, Any]:
    """The two :class:`VocabTokenizer` of an imported model: one vocabulary, two segmenters."""
    name = index["vocabulary"]
    if not isinstance(name, str) or Path(name).name != name:
        raise InputError(f"{index_path}: vocabulary {name!r} is not a plain file name")
    vocabulary = read_vocabulary(directory / name)
    pair = []
    for side in ("src", "tgt"):
        path = directory / index[side]
        try:
            proto = path.read_bytes()
        except OSError:
            raise InputError(f"{path}: tokenizer model not found or unreadable") from None
        append_eos = index.get(f"{side}_append_eos", False)
        if not isinstance(append_eos, bool):
            raise InputError(f"{index_path}: {side}_append_eos must be true or false")
        pair.append(VocabTokenizer(proto, vocabulary, append_eos=append_eos, source=str(path)))
    return pair[0], pair[1]
