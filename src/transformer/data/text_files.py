"""Reading UTF-8 text files, plain or gzip, with errors that name the file, line and byte offset.

Every reader in ``transformer.data`` goes through :func:`iter_file_lines`, so a missing, empty,
corrupt or non-UTF-8 file always fails the same way: one :class:`InputError` line naming the file
(and the line, and the byte offset into the uncompressed text, where there is one).

Lines are split on ``"\\n"`` only (with a trailing ``"\\r"`` removed), never with
:meth:`str.splitlines`, which also splits on U+2028, U+0085 and other characters that may appear
inside a sentence and would silently misalign parallel files.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from transformer.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"


class _OwnedGzip(gzip.GzipFile):
    """A gzip reader over an open file that it closes with itself."""

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def _open_binary(path: Path) -> tuple[BinaryIO, bool]:
    """Open ``path`` for reading bytes, transparently gunzipping it when it starts with the gzip
    magic number (whatever its suffix); also says whether it is gzip."""
    if not path.exists():
        raise InputError(f"{path}: file not found")
    if path.is_dir():
        raise InputError(f"{path}: is a folder, expected a text file")
    try:
        raw = open(path, "rb")  # noqa: SIM115 - handed to the caller, closed there
    except OSError as err:
        raise InputError(f"{path}: cannot open ({err.strerror})") from err
    # peek, not read and seek back: a pipe (`<(zcat big.gz)`, /dev/stdin) cannot seek
    is_gzip = raw.peek(2)[:2] == GZIP_MAGIC
    if is_gzip:
        return _OwnedGzip(raw), True  # type: ignore[return-value]
    return raw, False


def iter_file_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for every line of a UTF-8 file, plain or gzip.

    ``line_number`` is 1-based; ``text`` has its line ending (``\\n`` or ``\\r\\n``) removed but is
    otherwise untouched (a leading UTF-8 byte-order mark on line 1 is dropped). Raises
    :class:`InputError` when the file is missing, a folder, empty (no bytes after decompression), a
    corrupt gzip file, or not UTF-8; the last names the line and the byte offset of the first bad
    byte, counted from the start of the uncompressed file.
    """
    path = Path(path)
    stream, is_gzip = _open_binary(path)
    with stream:
        offset = 0
        line_number = 0
        try:
            for raw_line in stream:
                line_number += 1
                body = raw_line[:-1] if raw_line.endswith(b"\n") else raw_line
                if body.endswith(b"\r"):
                    body = body[:-1]
                start = 0
                if line_number == 1 and body.startswith(UTF8_BOM):
                    start = len(UTF8_BOM)
                try:
                    text = body[start:].decode("utf-8")
                except UnicodeDecodeError as err:
                    bad = body[start + err.start : start + err.start + 1]
                    raise InputError(
                        f"{path}, line {line_number}: not valid UTF-8 (byte 0x{bad.hex()} at byte "
                        f"offset {offset + start + err.start} of the file)"
                    ) from None
                yield line_number, text
                offset += len(raw_line)
        except (OSError, EOFError, zlib.error) as err:
            # gzip raises BadGzipFile (an OSError), EOFError for a truncated stream, zlib.error for
            # corrupt data
            what = "not a readable gzip file" if is_gzip else "read error"
            raise InputError(f"{path}: {what} after line {line_number} ({err})") from None
    if line_number == 0:
        raise InputError(f"{path}: file is empty")


def read_json(path: Path, *, what: str, missing: str) -> Any:
    """The JSON value in the file ``path``. A missing file raises :class:`InputError`
    ``"{path}: {missing}"``; an unreadable or invalid one ``"{path}: unreadable {what} (why)"``."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: {missing}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: unreadable {what} ({err})") from None


def json_object(line: str, *, path: Path | str, number: int) -> dict[str, Any]:
    """The JSON object on line ``number`` of ``path`` (JSON Lines files: classification data,
    ``metrics.jsonl``); InputError naming the file and line when it is not JSON or not an object."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}, line {number}: not valid JSON ({err.msg})") from None
    if not isinstance(value, dict):
        raise InputError(f"{path}, line {number}: expected a JSON object, got {type(value).__name__}")
    return value



def read_text_file(path: str | os.PathLike[str]) -> str:
    """The whole text of a UTF-8 file, plain or gzip, line endings and all (a leading byte-order
    mark dropped): for a document read as one piece (``translate --format html -i``). Raises
    :class:`InputError` as :func:`iter_file_lines` does, naming the byte offset of a bad byte."""
    path = Path(path)
    stream, is_gzip = _open_binary(path)
    with stream:
        try:
            data = stream.read()
        except (OSError, EOFError, zlib.error) as err:
            what = "not a readable gzip file" if is_gzip else "read error"
            raise InputError(f"{path}: {what} ({err})") from None
    if not data:
        raise InputError(f"{path}: file is empty")
    data = data[len(UTF8_BOM):] if data.startswith(UTF8_BOM) else data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not valid UTF-8 (byte 0x{data[err.start:err.start + 1].hex()} "
                         f"at byte offset {err.start} of the file)") from None
