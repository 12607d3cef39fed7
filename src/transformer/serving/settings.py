"""What a server lets in and how long it keeps a request: every default of ``transformer serve``,
written once (the command line's flags only override them).

    settings = ServeSettings(limits=Limits(max_texts=16), timeout_s=10.0,
                             api_keys=read_keys_file("keys.txt"))

A setting out of range raises :class:`~transformer.errors.InputError` naming the flag that sets
it (``--max-texts must be a positive integer, got 0``). This module imports nothing heavy, so the
command line reads its defaults for ``--help``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformer.errors import InputError


def _positive_int(value: int, flag: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{flag} must be a positive integer, got {value!r}")


def _positive_seconds(value: float, flag: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value <= 0:
        raise InputError(f"{flag} must be a positive number of seconds, got {value!r}")


@dataclass(frozen=True)
class Limits:
    """The most one request may ask for (each a ``serve`` flag: ``--max-texts`` and so on); what
    ``GET /v1/models`` shows under ``limits``. ``max_output_tokens`` also caps the length of a
    translation whose request names no ``max_len`` (per sentence)."""

    max_texts: int = 64  # texts in one request
    max_chars: int = 1000  # characters in one text (and in any other text field)
    max_beam: int = 16  # beam size and n-best list
    max_output_tokens: int = 512  # target tokens of one translated sentence

    def __post_init__(self) -> None:
        for name in ("max_texts", "max_chars", "max_beam", "max_output_tokens"):
            _positive_int(getattr(self, name), "--" + name.replace("_", "-"))

    def refusal(self, fields: Iterable[tuple[str, Any]]) -> str | None:
        """The one line a request of these ``(field, value)`` pairs gets for the first limit it
        passes, or None: every list (how many items: ``texts``, or a score's ``sources`` and
        ``targets``), every text field and every text in a list (how long; the model's name has
        its own limit), ``beam`` and ``nbest``, ``max_len``."""
        for name, value in fields:
            if isinstance(value, list | tuple) and len(value) > self.max_texts:
                return f"{name}: at most {self.max_texts} items, got {len(value)}"
            if name in ("beam", "nbest") and isinstance(value, int) and value > self.max_beam:
                return f"{name}: at most {self.max_beam}, got {value}"
            if name == "max_len" and isinstance(value, int) and value > self.max_output_tokens:
                return f"max_len: at most {self.max_output_tokens} output tokens, got {value}"
            if name == "model":
                continue
            texts = [(name, value)] if isinstance(value, str) else \
                [(f"{name}[{i}]", v) for i, v in enumerate(value)] if isinstance(value, list | tuple) else []
            for where, text in texts:
                inner = [(f"{where}[{j}]", t) for j, t in enumerate(text)] if isinstance(text, list | tuple) else [(where, text)]
                if len(inner) > self.max_texts:  # a list in a list: a text's constraints
                    return f"{where}: at most {self.max_texts} items, got {len(inner)}"
                for at, one in inner:
                    if isinstance(one, str) and len(one) > self.max_chars:
                        return f"{at}: longer than {self.max_chars} characters"
        return None


@dataclass(frozen=True)
class ApiKey:
    """One key the server accepts, and at most how many requests a minute it may make on ``/v1/``
    (None: no limit). ``name`` says where it was given (``--api-key 2``, ``keys.txt:3``), for
    errors and the log: never the key itself."""

    key: str = field(repr=False)
    per_minute: int | None = None
    name: str = "--api-key"

    def __post_init__(self) -> None:
        if not self.key or self.key != self.key.strip():  # headers arrive stripped: never matched
            raise InputError(f"{self.name}: the key is empty or starts or ends with a space")
        if self.per_minute is not None:
            _positive_int(self.per_minute, f"{self.name}: requests per minute")


def parse_api_key(spec: str, *, name: str = "--api-key") -> ApiKey:
    """``KEY`` or ``KEY:N`` (at most N requests a minute) -> :class:`ApiKey`. A key with a colon
    of its own and no limit is taken whole when what follows its last colon is not a number."""
    key, sep, rate = spec.rpartition(":")
    if sep and rate.isdigit():
        return ApiKey(key=key, per_minute=int(rate), name=name)
    return ApiKey(key=spec, name=name)


def api_keys(*, api_key: str | Sequence[str] | None = None,
             key_file: str | Path | None = None) -> tuple[ApiKey, ...]:
    """The keys of ``--api-key`` (one spec or several, each ``KEY`` or ``KEY:N``) and of
    ``--api-key-file``; none: the API is open."""
    specs = [api_key] if isinstance(api_key, str) else list(api_key or ())
    keys = [parse_api_key(spec, name=f"--api-key {i}") for i, spec in enumerate(specs, start=1)]
    if key_file is not None:
        keys += read_keys_file(key_file)
    return tuple(keys)


def read_keys_file(path: str | Path) -> tuple[ApiKey, ...]:
    """A keys file: one key a line, ``KEY`` or ``KEY REQUESTS_PER_MINUTE``; blank lines and lines
    starting with ``#`` are skipped. InputError naming the file and line for a bad or repeated one."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"--api-key-file {path}: cannot read it ({err})") from None
    keys: list[ApiKey] = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        where = f"{path}:{number}"
        if len(fields) > 2 or (len(fields) == 2 and not fields[1].isdigit()):
            raise InputError(f"{where}: expected 'KEY' or 'KEY REQUESTS_PER_MINUTE'")
        per_minute = int(fields[1]) if len(fields) == 2 else None
        if per_minute == 0:
            raise InputError(f"{where}: requests per minute must be positive, got 0")
        if any(k.key == fields[0] for k in keys):
            raise InputError(f"{where}: this key is given twice")
        keys.append(ApiKey(key=fields[0], per_minute=per_minute, name=f"{path.name}:{number}"))
    if not keys:
        raise InputError(f"--api-key-file {path}: no key in it")
    return tuple(keys)


@dataclass(frozen=True)
class ModelLanguages:
    """The languages the model ``model`` translates between, as ``serve --languages
    NAME=SOURCE:TARGET[,TARGET...]`` states them (for a run record without ``src_lang`` and
    ``tgt_lang``, or to say which of a multi-target model's ``>>id<<`` targets to offer and under
    which code). Codes are lowercased, as LibreTranslate's are."""

    model: str
    source: str
    targets: tuple[str, ...]


def parse_languages(spec: str) -> ModelLanguages:
    """``NAME=SOURCE:TARGET[,TARGET...]`` -> :class:`ModelLanguages`; InputError naming the flag
    and the value for anything else."""
    name, sep, pair = spec.partition("=")
    source, colon, targets = pair.partition(":")
    codes = [t.strip().lower() for t in targets.split(",")]
    if not sep or not colon or not name or not source.strip() or not all(codes) \
            or any(c.isspace() or "=" in c for c in [source, *codes]):
        raise InputError(f"--languages {spec!r}: expected NAME=SOURCE:TARGET[,TARGET...] "
                         "(e.g. en-de=en:de)")
    if len(set(codes)) != len(codes):
        raise InputError(f"--languages {spec!r}: a target is given twice")
    return ModelLanguages(model=name, source=source.strip().lower(), targets=tuple(codes))


TIMEOUT_PER_BOUND = 2.0  # the default --timeout-s, in --max-queue-wait-s


@dataclass(frozen=True)
class ServeSettings:
    """How the server batches, what it lets in and how long a request may wait.

    Batching: a batch waits up to ``max_wait_ms`` for company and holds at most
    ``max_batch_tokens`` source tokens; ``batching=False`` runs every request alone.
    Overload: a request is let in only if its answer is due within ``max_queue_wait_s`` seconds
    (what is queued and running, at the measured seconds per request and per source token of the
    model's recent batches); one past it is refused at once with 503. A request still queued
    ``timeout_s`` (default: twice ``max_queue_wait_s``) after it came (or its own shorter
    ``timeout_ms``) leaves the queue with 504. On SIGTERM the process answers every admitted
    request for at most ``drain_s`` seconds, then exits.
    """

    max_wait_ms: float = 50.0  # longest wait for more requests after the first of a batch
    max_batch_tokens: int = 4096  # source tokens in one batch
    batching: bool = True
    max_body_bytes: int = 1 << 20
    api_keys: tuple[ApiKey, ...] = ()  # none: the API is open
    cors_origins: tuple[str, ...] = ()
    # languages stated for models whose run record lacks them (serve --languages)
    model_languages: tuple[ModelLanguages, ...] = ()
    limits: Limits = field(default_factory=Limits)
    # a latency target, not a machine figure: under overload the requests let in take about
    # this long (p99 1.5-1.7 s at 1.0, 0.95 s at 0.5, a shared core of a 2-core AMD EPYC at
    # 4x; benchmarks/serve.py --overload), and batches of a second's work answer 1.2-1.3x
    # as many requests per CPU second as batches of half a second's
    max_queue_wait_s: float = 1.0
    # None: twice max_queue_wait_s, so that what the admission misjudges never waits in the
    # queue ten times the bound (the HTTP reference's p99 at the default bound is 2 s)
    timeout_s: float | None = None
    drain_s: float = 30.0

    def __post_init__(self) -> None:
        if self.timeout_s is None and isinstance(self.max_queue_wait_s, int | float):
            object.__setattr__(self, "timeout_s", TIMEOUT_PER_BOUND * self.max_queue_wait_s)
        if not self.max_wait_ms >= 0:
            raise InputError(f"--batch-wait-ms must be non-negative, got {self.max_wait_ms}")
        _positive_int(self.max_batch_tokens, "--batch-tokens")
        _positive_int(self.max_body_bytes, "--max-body-bytes")
        _positive_seconds(self.max_queue_wait_s, "--max-queue-wait-s")
        _positive_seconds(self.timeout_s, "--timeout-s")
        _positive_seconds(self.drain_s, "--drain-s")
        keys = [k.key for k in self.api_keys]
        if len(set(keys)) != len(keys):
            raise InputError("--api-key: a key is given twice")
        named = [m.model for m in self.model_languages]
        if len(set(named)) != len(named):
            raise InputError("--languages: a model's languages are given twice")

    def languages_of(self, model: str) -> ModelLanguages | None:
        """The languages stated for ``model`` (``serve --languages``), or None."""
        return next((m for m in self.model_languages if m.model == model), None)

    def describe(self) -> dict[str, float | int]:
        """What ``GET /v1/models`` shows under ``limits`` (and the page)."""
        limits = self.limits
        return {"max_texts": limits.max_texts, "max_chars": limits.max_chars,
                "max_beam": limits.max_beam, "max_output_tokens": limits.max_output_tokens,
                "timeout_s": self.timeout_s, "max_queue_wait_s": self.max_queue_wait_s,
                "max_body_bytes": self.max_body_bytes}
