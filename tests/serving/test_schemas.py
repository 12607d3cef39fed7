"""error_line: every kind of validation error as the one line a bad request gets (FIELD: what is
wrong, the limit), from the error dicts FastAPI/pydantic give it."""

from __future__ import annotations

import pytest

from transformer.serving.schemas import error_line


@pytest.mark.parametrize(("error", "line"), [
    ({"type": "json_invalid", "loc": ("body", 12), "ctx": {"error": "Expecting value"}},
     "body: not valid JSON (Expecting value)"),
    ({"type": "json_invalid", "loc": ("body",)}, "body: not valid JSON (decode error)"),
    ({"type": "missing", "loc": ("body", "texts"), "msg": "Field required"}, "texts: required"),
    ({"type": "extra_forbidden", "loc": ("body", "colour")}, "colour: unknown field"),
    ({"type": "too_long", "loc": ("body", "texts"), "ctx": {"max_length": 64}}, "texts: at most 64 items"),
    ({"type": "too_long", "loc": ("body", "texts"), "msg": "too long"}, "texts: too long"),
    ({"type": "string_too_long", "loc": ("body", "texts", 3), "ctx": {"max_length": 1000}},
     "texts[3]: longer than 1000 characters"),
    ({"type": "too_short", "loc": ("body", "texts")}, "texts: must not be empty"),
    ({"type": "string_too_short", "loc": ("body", "text")}, "text: must not be empty"),
    ({"type": "int_type", "loc": ("body", "beam"), "msg": "Input should be a valid integer"},
     "beam: Input should be a valid integer"),
    ({"type": "int_type", "loc": ("body", "beam")}, "beam: invalid value"),
    ({"type": "model_type", "loc": ("body",), "msg": "Input should be an object"},
     "body: Input should be an object"),
    ({"msg": "no loc, no type"}, "body: no loc, no type"),
    ({"type": "x", "loc": ("body", "a", "b", 0, "c"), "msg": "m"}, "a.b[0].c: m"),
])
def test_one_error(error, line):
    assert error_line([error]) == line


def test_no_error_and_several():
    assert error_line([]) == "body: invalid request"
    missing = {"type": "missing", "loc": ("body", "model")}
    assert error_line([missing, missing]) == "model: required (and 1 more)"
    assert error_line([missing] * 3) == "model: required (and 2 more)"
