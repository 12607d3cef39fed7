"""inference.loader: the checks before any model is read."""

from __future__ import annotations

import pytest

from transformer.errors import InputError
from transformer.inference.loader import load_translator


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"batch_size": 0}, "--batch-size"),
    ({"beam_size": 2, "nbest": 3}, "--nbest"),
])
def test_bad_decoding_values_fail_before_loading(tmp_path, kwargs, match):
    with pytest.raises(InputError, match=match):
        load_translator(tmp_path / "no-model-here", **kwargs)
