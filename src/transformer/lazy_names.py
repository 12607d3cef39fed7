"""A package's names loaded on first use (PEP 562), so that importing a package, or one of its
light modules, imports none of its heavy ones (PyTorch) until a name that needs them is used.

    # in a package's __init__.py
    if TYPE_CHECKING:
        from transformer.decoding.beam import beam_search
    __getattr__, __dir__ = lazy_names(__name__, {"transformer.decoding.beam": ("beam_search",)})

The ``TYPE_CHECKING`` imports keep the names visible to type checkers and to the layout test
(tests/test_layout.py reads imports from the text), which also holds them to the table.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from typing import Any


def lazy_names(package: str, homes: Mapping[str, Sequence[str]]
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` whose public names live in the modules of
    ``homes`` (module -> the names it defines). A name is imported on first use and kept in the
    package's namespace, so it is looked up once."""
    home_of = {name: module for module, names in homes.items() for name in names}
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:  # noqa: N807 - PEP 562's name
        module = home_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # importing PyTorch makes about 170,000 objects that live as long as the process:
        # collecting garbage among them as they come (some 400 collections) costs about 0.1 s,
        # so the collector waits until the import is done (and stays off if it was off)
        collecting = gc.isenabled()
        gc.disable()
        try:
            value = getattr(import_module(module), name)
        finally:
            if collecting:
                gc.enable()
        namespace[name] = value
        return value

    def __dir__() -> list[str]:  # noqa: N807 - PEP 562's name
        return sorted({*namespace, *home_of})

    return __getattr__, __dir__
