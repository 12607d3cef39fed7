"""Request bodies of the JSON API, and the one-line error every bad request gets.

Validation is strict (``"4"`` is not a beam size) and unknown fields are refused, so a typo never
passes silently. :func:`error_line` turns a validation error into ``"FIELD: what is wrong (the
limit)"``. How many texts, how long, how big a beam and how many output tokens are the server's
own limits (``serve --max-texts`` and so on: :class:`transformer.serving.settings.Limits`),
checked by the routes after these types.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from transformer.config.decoding import FIELDS, REQUEST_FIELDS
from transformer.serving.settings import Limits

__all__ = ["REQUEST_FIELDS", "TranslateRequest"]


# the default limits, for a schema that states one (the server's own, set by its flags, are
# checked by the routes: transformer.serving.settings.Limits.refusal)
MAX_TEXTS = Limits().max_texts
MAX_CHARS = Limits().max_chars
MAX_BEAM = Limits().max_beam
MAX_OUTPUT_TOKENS = Limits().max_output_tokens

Text = str  # at most the server's --max-chars: checked by the routes
ModelName = Annotated[str, Field(min_length=1, max_length=200)]


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    # the longest this request may wait in its model's queue (less than the server's --timeout-s)
    timeout_ms: Annotated[int, Field(ge=1)] | None = None


class _TranslateFields(Request):
    """``POST /v1/translate``: ``texts`` translated with beam search (``beam=1``: greedy), or
    sampled; steered by target prefixes, repetition guards, a least length, forbidden phrases and
    terminology. The decoding options' fields are made from their table
    (:data:`transformer.config.decoding.FIELDS`); a field left out (or null) takes the run's value
    or the default of :mod:`transformer.config.decoding` (``beam``: 4, or 1 with ``sampling``), and
    a bad value is refused by the options' own check, naming the field."""

    model: ModelName
    texts: Annotated[list[Text], Field(min_length=1)]
    split: bool = True  # each text split into sentences, translated one by one (False: whole)
    # "html": each text is an HTML document, answered with its markup kept (serving/html_route.py)
    format: Literal["text", "html"] = "text"
    target_prefixes: Annotated[list[Text], Field(min_length=1)] | None = None
    tag: Text | None = None  # a source-vocabulary piece put before every sentence (">>fra<<")
    # target phrases each text's translation must contain (one list per text), and glossary
    # entries [source term, target term] whose target term a text must contain where it holds
    # the source term (whole words, case-sensitive): transformer.inference.glossary
    constraints: Annotated[list[list[Text]], Field(min_length=1)] | None = None
    glossary: list[Annotated[list[Text], Field(min_length=2, max_length=2)]] | None = None

    def decode_changes(self) -> dict[str, Any]:
        """The request's decoding options as DecodeOptions fields (those given), the target
        prefixes aside: they are per text (:meth:`prefixes`), so that requests that differ only
        in them are decoded in one batch."""
        given = {f.name: getattr(self, f.request) for f in FIELDS
                 if f.request is not None and f.name != "target_prefix"}
        return {name: value for name, value in given.items() if value is not None}

    def prefixes(self) -> list[str]:
        """One target prefix per text ("" for none). ValueError, naming the field, when both
        fields are given or ``target_prefixes`` does not have one entry per text."""
        if self.target_prefixes is None:
            return [self.target_prefix or ""] * len(self.texts)
        if self.target_prefix is not None:
            raise ValueError("target_prefixes: give target_prefix (every text) or target_prefixes "
                             "(one per text), not both")
        if len(self.target_prefixes) != len(self.texts):
            raise ValueError(f"target_prefixes: {len(self.target_prefixes)} given for "
                             f"{len(self.texts)} texts; give one per text (\"\" for none)")
        return list(self.target_prefixes)

    def phrases(self) -> list[list[str]] | None:
        """Each text's target phrases: its own ``constraints``, then the ``glossary``'s target
        terms whose source terms it holds; None when neither field is given. ValueError, naming
        the field, for a count that is not one per text or an empty phrase or term."""
        from transformer.inference.glossary import merged_phrases

        if self.constraints is None and self.glossary is None:
            return None
        own = self.constraints if self.constraints is not None else [[] for _ in self.texts]
        if len(own) != len(self.texts):
            raise ValueError(f"constraints: {len(own)} given for {len(self.texts)} texts; give "
                             "one list of phrases per text ([] for none)")
        for i, phrases in enumerate(own):
            for j, phrase in enumerate(phrases):
                if not phrase.strip():
                    raise ValueError(f"constraints[{i}][{j}]: must not be empty")
        pairs = [(s.strip(), t.strip()) for s, t in self.glossary or []]
        for i, (source, target) in enumerate(pairs):
            if not source or not target:
                raise ValueError(f"glossary[{i}]: the {'source' if not source else 'target'} term is empty")
        return merged_phrases(self.texts, own, pairs)


_KINDS: dict[str, Any] = {"int": int, "float": float, "bool": bool, "text": Text, "phrases": list[Text]}
TranslateRequest = create_model(
    "TranslateRequest", __base__=_TranslateFields, __module__=__name__,
    **{f.request: (_KINDS[f.kind] | None, None) for f in FIELDS if f.request is not None})


class AttentionRequest(Request):
    """``POST /v1/attention``: every attention map of ``text`` translated greedily (or forced to
    ``target``), or of ``text`` classified."""

    model: ModelName
    text: Annotated[str, Field(min_length=1)]
    target: Annotated[str, Field(min_length=1)] | None = None
    # a translation model's text of several sentences: which one to show (from 1)
    sentence: Annotated[int, Field(ge=1)] = 1


class ClassifyRequest(Request):
    """``POST /v1/classify``: labels and probabilities of each text."""

    model: ModelName
    texts: Annotated[list[Text], Field(min_length=1)]


def _field(loc: tuple[Any, ...]) -> str:
    """("body", "texts", 3) -> "texts[3]"; the body itself -> "body"."""
    parts = [p for p in loc if p != "body"]
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "body"


def error_line(errors: list[dict[str, Any]]) -> str:
    """One line naming the field and the limit, from FastAPI/pydantic validation errors (the first
    error; the others are counted)."""
    if not errors:
        return "body: invalid request"
    err = errors[0]
    kind = err.get("type", "")
    where = _field(tuple(err.get("loc", ())))
    ctx = err.get("ctx") or {}
    if kind == "json_invalid":
        line = f"body: not valid JSON ({ctx.get('error', 'decode error')})"
    elif kind == "missing":
        line = f"{where}: required"
    elif kind == "extra_forbidden":
        line = f"{where}: unknown field"
    elif kind == "too_long" and "max_length" in ctx:
        line = f"{where}: at most {ctx['max_length']} items"
    elif kind == "string_too_long":
        line = f"{where}: longer than {ctx.get('max_length')} characters"
    elif kind in ("too_short", "string_too_short"):
        line = f"{where}: must not be empty"
    else:
        line = f"{where}: {err.get('msg', 'invalid value')}"
    return line if len(errors) == 1 else f"{line} (and {len(errors) - 1} more)"
