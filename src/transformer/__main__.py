"""``python -m transformer``: the same as the ``transformer`` command (whose entry point is
:func:`console`)."""

from __future__ import annotations

import gc
import sys
from typing import NoReturn

from transformer.cli import main


def console() -> NoReturn:
    """Run :func:`transformer.cli.main` on sys.argv and exit with its status. The objects the
    imports made (about 170,000, mostly PyTorch's, alive until the process ends) are first
    frozen out of the garbage collector: its full collections, the one at exit among them,
    walked them all, 0.2-0.4 s of a ``translate`` command (``benchmarks/decoding.py --suite e2e``)."""
    gc.freeze()
    sys.exit(main())


if __name__ == "__main__":
    console()
