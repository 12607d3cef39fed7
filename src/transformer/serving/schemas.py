"""Request bodies of the JSON API, and the one-line error every bad request gets.

Validation is strict (``"4"`` is not a beam size) and unknown fields are refused, so a typo never
passes silently. :func:`error_line` turns a validation error into ``"FIELD: what is wrong (the
limit)"``. How many texts, how long, how big a beam and how many output tokens are the server's
own limits (``serve --max-texts`` and so on: :class:`transformer.serving.settings.Limits`),
checked by the routes after these types.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from transformer.serving.settings import Limits

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


class TranslateRequest(Request):
    """``POST /v1/translate``: ``texts`` translated with beam search (``beam=1``: greedy)."""

    model: ModelName
    texts: Annotated[list[Text], Field(min_length=1)]
    beam: Annotated[int, Field(ge=1)] = 4
    nbest: Annotated[int, Field(ge=1)] | None = None
    length_penalty: Annotated[float, Field(ge=0.0, le=10.0)] = 0.6
    max_len: Annotated[int, Field(ge=1)] | None = None
    split: bool = True  # each text split into sentences, translated one by one (False: whole)
    alignments: bool = False  # each translation's word pairs [i, j] (transformer.inference.alignment)


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
