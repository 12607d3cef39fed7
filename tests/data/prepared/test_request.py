"""The request's filters: a bad one is refused in one line that names it."""

from __future__ import annotations

import pytest

from transformer.data.prepared.request import Filters
from transformer.errors import InputError


@pytest.mark.parametrize("text", ["max-len=0", "ratio=0.5", "ratio=x", "dedup=1", "sort", "truncate=-3"])
def test_bad_filters_name_the_item(text):
    with pytest.raises(InputError, match=text.split(",")[0].replace(".", r"\.")):
        Filters.parse(text)
