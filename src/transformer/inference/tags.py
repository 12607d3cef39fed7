"""Source tags: one vocabulary piece put before every source sentence to choose what the model
does with it, as multi-target OPUS-MT models choose their target language with ``>>deu<<``.

``translate --target-lang deu`` is ``--tag '>>deu<<'``; either is refused in one line when the
model's source vocabulary has no such piece. The tag goes in as its one id, before the sentence's
pieces (as Marian and Hugging Face's MarianTokenizer put a language code), never through the
tokenizer, which would split it.

    tag_ids(translator.src_tokenizer, ">>deu<<", flag="--target-lang deu")   # [id]
    target_langs(translator.src_tokenizer)                                   # ["deu", "fra", ...]
"""

from __future__ import annotations

import re
from typing import Any

from transformer.errors import InputError

LANGUAGE_TAG = re.compile(r">>([^<>\s]+)<<")
UNK_PIECE = "<unk>"


def language_tag(lang: str) -> str:
    """The tag of target language ``lang``: ``>>lang<<``."""
    return f">>{lang}<<"


def tag_ids(tokenizer: Any, tag: str, *, flag: str) -> list[int]:
    """``[id of tag]``; InputError naming ``flag`` when the vocabulary has no such piece."""
    unk = tokenizer.piece_to_id(UNK_PIECE)
    found = tokenizer.piece_to_id(tag) if tag and not tag.isspace() else unk
    if found == unk or tokenizer.id_to_piece(found) != tag:
        known = target_langs(tokenizer)
        hint = f" (its language tags: {', '.join(known[:12])}{', ...' if len(known) > 12 else ''})" \
            if known else " (it has no language tags)"
        raise InputError(f"{flag}: the model's source vocabulary has no piece {tag!r}{hint}")
    return [found]


def target_langs(tokenizer: Any) -> list[str]:
    """The language IDs of the ``>>ID<<`` pieces in ``tokenizer``'s vocabulary, in id order."""
    found = []
    for i in range(tokenizer.vocab_size):
        match = LANGUAGE_TAG.fullmatch(tokenizer.id_to_piece(i))
        if match:
            found.append(match.group(1))
    return found
