"""The tokenizer stage of ``transformer prepare``: the tokenizers copied from a run (or a model or
prepared data directory), or trained on a reservoir sample of ``tokenizer_sample`` sentences
drawn in one pass over the training text."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from transformer.atomic import existing_dir
from transformer.data.prepared.chunk_encoding import iter_line_pairs
from transformer.data.prepared.layout import TOKENIZER_DIR
from transformer.data.prepared.request import PrepareRequest
from transformer.data.tokenizer import UNK_ID, Tokenizer
from transformer.data.tokenizer_pair import INDEX_FILE, load_tokenizers, save_tokenizers
from transformer.errors import InputError


def tokenizer_folder(run_dir: str) -> Path:
    """The tokenizer folder of ``run_dir`` (a run, model or prepared data directory, or the
    folder itself); InputError when it has none."""
    path = Path(run_dir)
    if (path / INDEX_FILE).is_file():
        return path
    folder = existing_dir(path / TOKENIZER_DIR)
    if folder is None:
        raise InputError(f"--tokenizer-from {run_dir}: no tokenizer/ folder (expected a run or "
                         "model directory, or a prepared data directory)")
    return folder


def make_tokenizers(request: PrepareRequest, folder: Path) -> tuple[Any, Any, int, str]:
    """The (source, target) tokenizers the ids are made with, saved to ``folder``: copied from
    ``request.tokenizer_from`` or trained. Returns them with the number of sentences the training
    sampled (0 for a copy) and a line saying what was done, for the stage's log."""
    if request.tokenizer_from is not None:
        shutil.copytree(tokenizer_folder(request.tokenizer_from), folder)
        src_tok, tgt_tok = load_tokenizers(folder)
        tag_ids(src_tok, request.tags, source=f"--tokenizer-from {request.tokenizer_from}")
        return src_tok, tgt_tok, 0, (f"from {request.tokenizer_from}: {src_tok.vocab_size:,}"
                                     f"/{tgt_tok.vocab_size:,} pieces")
    src_tok, tgt_tok, seen = _train_tokenizers(request)
    sampled = min(seen, request.tokenizer_sample * (1 if request.joint else 2))
    save_tokenizers(src_tok, tgt_tok, folder)
    return src_tok, tgt_tok, sampled, (f"{'joint ' if request.joint else ''}{request.model_type} "
                                       f"vocabulary of {src_tok.vocab_size:,} pieces trained on "
                                       f"{sampled:,} of {seen:,} sentences")


def tag_ids(src_tok: Any, tags: Sequence[str] | None, *,
            source: str) -> list[int | None] | None:
    """The source vocabulary's id of each of ``tags`` (None for no tags; an empty tag, an
    untagged corpus, has id None); InputError naming ``source`` when one is not a piece of its
    own (as ``translate --tag`` needs it)."""
    if tags is None:
        return None
    ids: list[int | None] = []
    for tag in tags:
        if not tag:
            ids.append(None)
            continue
        found = src_tok.piece_to_id(tag)
        if found == UNK_ID or src_tok.id_to_piece(found) != tag:
            raise InputError(f"--tags {','.join(tags)}: {source}'s source vocabulary has no piece "
                             f"{tag!r}; a tokenizer trained by prepare --tags has one")
        ids.append(found)
    return ids


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
    """Tokenizers trained on a reservoir sample of the training text (one pass per tokenizer);
    returns them and the number of sentences read."""
    options = dict(vocab_size=request.vocab_size, model_type=request.model_type,
                   byte_fallback=request.byte_fallback,
                   character_coverage=request.character_coverage,
                   sample_size=request.tokenizer_sample, seed=request.seed)
    tags = [t for t in dict.fromkeys(request.tags or ()) if t]  # pieces of their own, source side
    if request.joint:
        counter = _Count(_sentences(request, None))
        tok = Tokenizer.train(counter, user_defined_symbols=tags, **options)
        return tok, tok, counter.count
    counter = _Count(_sentences(request, 0))
    src = Tokenizer.train(counter, user_defined_symbols=tags, **options)
    tgt = Tokenizer.train(_sentences(request, 1), **options)
    return src, tgt, 2 * counter.count


class _Count:
    """``items`` passed through, counted: the sample's reservoir sees every sentence once."""

    def __init__(self, items: Iterator[str]) -> None:
        self.items, self.count = items, 0

    def __iter__(self) -> Iterator[str]:
        for item in self.items:
            self.count += 1
            yield item
