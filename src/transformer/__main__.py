"""``python -m transformer``: the same as the ``transformer`` command (whose entry point is
:func:`console`)."""

from __future__ import annotations

import gc
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any, NoReturn

from transformer.cli import main


class FreezeAfterTorch:
    """A meta-path finder that, when PyTorch is first imported, imports it with the garbage
    collector off and then freezes what the import made (about 170,000 objects, alive until the
    process ends): collecting among them as they come costs about 0.1 s, and every later full
    collection, the one at exit among them, would walk them all (0.2-0.4 s of a ``translate``
    command). A command that never imports PyTorch pays nothing. Removes itself once used."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)  # by the finders after this one
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_freeze(module: ModuleType) -> None:
            collecting = gc.isenabled()
            gc.disable()
            try:
                exec_module(module)
            finally:
                gc.freeze()
                if collecting:
                    gc.enable()

        spec.loader.exec_module = exec_and_freeze  # type: ignore[method-assign]
        return spec


def console() -> NoReturn:
    """Run :func:`transformer.cli.main` on sys.argv and exit with its status. The objects the
    imports made are frozen out of the garbage collector: those of the command line now, and
    PyTorch's when (and if) a verb imports it (:class:`FreezeAfterTorch`)."""
    gc.freeze()
    if "torch" not in sys.modules:
        sys.meta_path.insert(0, FreezeAfterTorch())
    sys.exit(main())


if __name__ == "__main__":
    console()
