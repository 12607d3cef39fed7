"""What every picture shares: a bare matplotlib Figure (no pyplot, no display, no global backend),
token labels that render as typed, and atomic saving.

Figures are ``matplotlib.figure.Figure`` objects created directly, so drawing never opens a window
or touches pyplot's global state and works without a display; saving renders through Agg (PNG)
or the SVG backend.
"""

from __future__ import annotations

import contextlib
import functools
import os
import textwrap
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

from matplotlib.figure import Figure

from transformer.atomic import atomic_write
from transformer.errors import InputError

FORMATS = ("png", "svg", "pdf")
DPI = 120
# Fonts tried after DejaVu Sans for glyphs it lacks (Korean, Chinese, Japanese), when installed.
FALLBACK_FONTS = ("Noto Sans CJK KR", "Noto Sans KR", "NanumGothic", "Malgun Gothic",
                  "AppleGothic", "Noto Sans CJK JP", "Noto Sans CJK SC", "WenQuanYi Zen Hei")


@functools.lru_cache(maxsize=1)
def font_family() -> tuple[str, ...]:
    """DejaVu Sans followed by the installed fallback fonts (matplotlib falls back per glyph)."""
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    return ("DejaVu Sans", *(name for name in FALLBACK_FONTS if name in installed))


@contextlib.contextmanager
def style() -> Iterator[None]:
    """The fonts and sizes of every picture; create and save figures inside it."""
    import matplotlib

    with matplotlib.rc_context({"font.family": list(font_family()), "font.size": 9,
                                "axes.titlesize": 9}), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from")
        yield


def new_figure(width: float, height: float) -> Figure:
    """A Figure of ``width`` x ``height`` inches with constrained layout (no pyplot involved)."""
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def wrap_title(title: str, width: float) -> str:
    """``title`` broken into lines that fit a figure ``width`` inches wide (at 10 points)."""
    return "\n".join(textwrap.wrap(title, width=max(20, int(width / 0.085)))) or title


def title_height(title: str, width: float) -> float:
    """Inches that :func:`wrap_title`'s lines take (nothing for no title)."""
    return 0.2 + 0.2 * wrap_title(title, width).count("\n") if title else 0.0


def display_token(piece: str) -> str:
    """A token as an axis label: ``$`` escaped (no mathtext), empty pieces shown as ``∅``."""
    if piece == "":
        return "∅"
    return piece.replace("$", r"\$")


def check_tokens(name: str, tokens: Sequence[str], length: int) -> list[str]:
    """``tokens`` as display labels, checking there is one per position."""
    if len(tokens) != length:
        raise ValueError(f"{name} has {len(tokens)} tokens but the weights have {length} positions")
    return [display_token(str(t)) for t in tokens]


def save_figure(fig: Figure, path: str | os.PathLike[str], *, svg: bool = False) -> list[Path]:
    """Write ``fig`` to ``path`` (format from its suffix: .png, .svg or .pdf) and, with ``svg``,
    an SVG copy beside it. Each file is written to a temporary name and renamed, so a failure
    never leaves a half-written picture. Returns the paths written.

    Raises InputError for a missing output folder, an unknown suffix or a path that is a folder.
    """
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise InputError(f"{path}: unknown picture format {path.suffix!r}; use .png, .svg or .pdf")
    if not path.parent.is_dir():
        raise InputError(f"{path}: folder {path.parent} does not exist")
    targets = [(path, fmt)]
    if svg and fmt != "svg":
        targets.append((path.with_suffix(".svg"), "svg"))
    for target, _ in targets:
        if target.is_dir():
            raise InputError(f"{target}: is a folder; name a picture file")
    written = []
    for target, kind in targets:
        with style():
            atomic_write(target, functools.partial(_save, fig, kind=kind))
        written.append(target)
    return written


def _save(fig: Figure, tmp: Path, *, kind: str) -> None:
    fig.savefig(tmp, format=kind, dpi=DPI)
