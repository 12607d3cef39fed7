"""One-line error reasons: the first (or PyTorch's last) line of an exception's text, trimmed, and
the exception's type where it has no text."""

from __future__ import annotations

import pytest

from transformer.errors import first_line, last_line


@pytest.mark.parametrize(("err", "first", "last"), [
    (RuntimeError("Error(s) in loading:\n\tsize mismatch for w: [3] vs [4]\n"),
     "Error(s) in loading:", "size mismatch for w: [3] vs [4]"),
    (OSError("  one line  "), "one line", "one line"),
    (IndexError(), "IndexError", "IndexError"),
    (ValueError(" \n "), "ValueError", "ValueError"),
])
def test_first_and_last_line(err, first, last):
    assert (first_line(err), last_line(err)) == (first, last)
