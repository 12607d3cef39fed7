"""The decoding options are one table (transformer.config.decoding.FIELDS): the dataclass's fields,
``translate``'s and ``evaluate``'s flags and ``POST /v1/translate``'s request fields are made from
it, hold the same names, and leave every default to the options (a flag or field not given is
None, so the run's value or DecodeOptions' default applies)."""

from __future__ import annotations

import dataclasses

import pytest

from transformer.cli import build_parser
from transformer.config.decoding import FIELDS, FLAGS, REQUEST_FIELDS, DecodeOptions


def _verb(name: str):
    for action in build_parser()._actions:  # noqa: SLF001
        if getattr(action, "choices", None) and name in action.choices:
            return action.choices[name]
    raise AssertionError(name)


# a value away from the default for each field, valid together with the others
CHANGED = {"beam_size": 1, "length_penalty": 1.0, "nbest": 1, "max_len_a": 2.0, "max_len_b": 3,
           "max_len": 40, "min_length": 2, "forbid": ("Hund",), "sampling": True,
           "sampling_topk": 5, "sampling_topp": 0.9, "temperature": 0.7, "seed": 3,
           "target_prefix": "Ein", "no_repeat_ngram": 2, "repetition_penalty": 1.2,
           "alignments": True}


def test_the_table_holds_every_option_once():
    names = [f.name for f in FIELDS]
    assert sorted(names) == sorted(f.name for f in dataclasses.fields(DecodeOptions))
    assert len(set(names)) == len(names) and set(CHANGED) == set(names)
    assert (FLAGS["beam_size"], REQUEST_FIELDS["beam_size"]) == ("--beam", "beam")  # public names kept
    DecodeOptions(**CHANGED)


@pytest.mark.parametrize("verb", ["translate", "evaluate"])
def test_the_flags_are_the_tables(verb):
    parser = _verb(verb)
    flags = parser._option_string_actions  # noqa: SLF001
    for field in FIELDS:
        if field.flag is None or (verb == "evaluate" and field.group == "translate"):
            assert field.flag is None or field.flag not in flags
            continue
        action = flags[field.flag]
        assert (action.dest, action.default, action.help) == (field.name, None, field.help)
    assert parser.parse_args(["--model", "m"]).__dict__.keys() >= {
        f.name for f in FIELDS if f.flag and (verb == "translate" or f.group != "translate")}


def test_the_request_fields_are_the_tables_and_reach_the_options():
    from transformer.serving.schemas import TranslateRequest

    declared = TranslateRequest.model_fields
    for field in FIELDS:
        if field.request is not None:
            assert declared[field.request].default is None, field.name
    body = {REQUEST_FIELDS[name]: list(value) if isinstance(value, tuple) else value
            for name, value in CHANGED.items() if name in REQUEST_FIELDS}
    request = TranslateRequest(model="m", texts=["a"], **body)
    changes = request.decode_changes()
    assert changes == {name: value for name, value in CHANGED.items()
                       if name in REQUEST_FIELDS and name != "target_prefix"} | {"forbid": ["Hund"]}
    assert DecodeOptions(**changes, target_prefix=request.target_prefix).forbid == ("Hund",)
    assert TranslateRequest(model="m", texts=["a"]).decode_changes() == {}
