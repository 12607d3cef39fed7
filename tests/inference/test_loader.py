"""inference.loader: the checks before any model is read."""

from __future__ import annotations

import pytest

from transformer.errors import InputError
from transformer.inference.loader import load_translator


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"batch_size": 0}, "--batch-size"),
    ({"beam_size": 2, "nbest": 3}, "--nbest"),
    ({"seed": 3}, "--seed: applies to sampling only"),
    ({"temperature": 0.5}, "--temperature"),
    ({"sampling": True, "beam_size": 4}, "--beam: sampling"),
    ({"sampling": True, "sampling_topp": 1.5}, "--sampling-topp"),
    ({"sampling": True, "sampling_topk": -1}, "--sampling-topk"),
    ({"no_repeat_ngram": -2}, "--no-repeat-ngram"),
    ({"repetition_penalty": 0.0}, "--repetition-penalty"),
    ({"colour": "red"}, "unknown decoding option 'colour'"),
])
def test_bad_decoding_values_fail_before_loading(tmp_path, kwargs, match):
    with pytest.raises(InputError, match=match):
        load_translator(tmp_path / "no-model-here", **kwargs)
