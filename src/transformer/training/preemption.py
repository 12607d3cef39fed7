"""Stopping cleanly on SIGTERM and SIGINT: a checkpoint at the next update boundary, then exit.

Batch schedulers and ``torchrun`` stop a job with SIGTERM (Ctrl-C sends SIGINT). While a
:class:`Preemption` is active, the first such signal only sets a flag; the training loop looks at it
after each optimizer update (:meth:`Preemption.requested`), writes a checkpoint and raises
:class:`~transformer.errors.RunStopped` with exit status 128 + signal (143 for SIGTERM, 130 for
SIGINT). A second signal exits at once (same status) without waiting: the checkpoint on disk is
then the last complete one, since every write is atomic.

Under ``torchrun`` a signal may reach one rank only, or the ranks at different updates; the loop
all-reduces the flag (maximum over ranks) so that every rank stops after the same update.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import Any

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)


def exit_status(signum: int) -> int:
    """The shell's status for a process ended by ``signum``: 128 + its number."""
    return 128 + int(signum)


class Preemption:
    """A context manager that turns SIGTERM/SIGINT into a request to stop at an update boundary.

    Outside the main thread (where Python cannot install handlers) it does nothing and
    :meth:`requested` is always 0. The previous handlers are restored on exit.
    """

    def __init__(self) -> None:
        self.signum = 0  # the first signal received, 0 while none
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Preemption:
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum:
            # the second signal: the user (or scheduler) will not wait for the checkpoint
            sys.stderr.write(f"transformer: {signal.Signals(signum).name} again: exiting at once; "
                             "the last complete checkpoint is kept\n")
            sys.stderr.flush()
            os._exit(exit_status(signum))
        self.signum = signum
        log.warning("%s received: stopping after this update with a checkpoint (send it again to "
                    "exit at once)", signal.Signals(signum).name)

    def requested(self) -> int:
        """The signal number received so far on this process, 0 if none."""
        return self.signum
