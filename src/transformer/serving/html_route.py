"""``POST /v1/translate`` with ``format: "html"``: each text is an HTML document, answered with
its markup kept and its text translated (:mod:`transformer.inference.html`).

The documents of one request are translated together in the model's queue, as a call of their
own (the batcher runs it alone, in the model's thread). Fields that ask for per-line output
(``nbest``, ``alignments``, ``constraints``, ``glossary``, target prefixes) are refused with 422;
a text the parser cannot read, with 400 naming it (``texts[2]: not an HTML document ...``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from transformer.errors import InputError
from transformer.serving.errors import ApiError
from transformer.serving.models import ServedModel

_PER_LINE = ("nbest", "alignments", "constraints", "glossary", "target_prefix", "target_prefixes")


def html_work(req: Any, model: ServedModel, *, options: Any, tag: tuple[int, ...]) -> Callable[[], Any]:
    """The call that translates the request's documents (to run in the model's queue); ApiError
    422 for a field HTML does not take, 400 for a text the parser cannot read."""
    for name in _PER_LINE:
        if getattr(req, name, None):
            raise ApiError(422, f"{name}: not available with format \"html\" (one translation per "
                           "document, its markup placed by alignments)")
    return html_call(model, list(req.texts), [f"texts[{k}]" for k in range(len(req.texts))],
                     options=options, tag=tag, split=req.split)


def html_call(model: ServedModel, documents: list[str], fields: list[str], *, options: Any,
              tag: tuple[int, ...], split: bool = True, src_lang: str | None = None,
              tgt_lang: str | None = None) -> Callable[[], Any]:
    """The call that translates ``documents`` (each named by its ``fields`` entry in an error)
    as HTML in the model's queue; ApiError 400 for one the parser cannot read."""
    from transformer.inference.html import translate_html_batch
    from transformer.inference.html_parse import check_readable

    for text, name in zip(documents, fields, strict=True):
        try:
            check_readable(text, field=name)
        except InputError as err:
            raise ApiError(400, str(err)) from None
    translator = model.translator

    def work() -> Any:
        return translate_html_batch(translator, documents, options=options, split=split,
                                    source_prefix=tag, fields=fields, src_lang=src_lang,
                                    tgt_lang=tgt_lang)

    return work


def html_rows(found: list[Any]) -> list[dict[str, Any]]:
    """The ``translations`` of an HTML answer: each document's ``text`` (HTML) and counts."""
    return [{"text": t.html, "sentences": t.sentences, "elements": t.elements,
             "split_elements": t.split, "empty_elements": t.empty} for t in found]
