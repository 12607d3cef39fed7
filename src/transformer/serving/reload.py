"""Reload without a restart: the models whose directories changed are loaded again and swapped in.

    report = await reload_changed(state)   # {"reloaded": [...], "unchanged": [...], "failed": {...}}

What SIGHUP and ``POST /v1/admin/reload`` do. A directory has changed when a file the loader reads
has (:func:`~transformer.serving.models.fingerprint`: each file's time, size and inode, so a
retrained model written in place or renamed into place is seen, and an untouched one is not
read). Each changed one is loaded in a thread of its own, through the same loader as at start
and at the precision the old one runs at, while the old one goes on answering; then it is swapped
in (:meth:`~transformer.serving.state.ServerState.swap`): requests already queued finish on the
old model, new ones go to the new. A directory that fails to load leaves the old model serving;
why is logged, counted, and shown in ``GET /v1/models`` until a later reload succeeds. One reload
runs at a time; one asked for meanwhile runs after it.

Write a new model beside the old and rename it into place (or let training finish writing) before
reloading: a directory caught half-written fails to load, and the next reload takes it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from transformer.errors import InputError
from transformer.serving.models import fingerprint, load_one
from transformer.serving.state import ServerState

log = logging.getLogger(__name__)


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return text if isinstance(err, InputError) else f"{type(err).__name__}: {text}".rstrip(": ")


async def reload_changed(state: ServerState) -> dict[str, Any]:
    """Reload every model of ``state`` whose directory changed; returns which were reloaded,
    which were unchanged and, for each that failed, the one line why (the old one serving on)."""
    report: dict[str, Any] = {"reloaded": [], "unchanged": [], "failed": {}}
    loop = asyncio.get_running_loop()
    async with state.reloading:
        for name, old in list(state.served.items()):
            if await loop.run_in_executor(None, fingerprint, old.path) == old.fingerprint:
                report["unchanged"].append(name)
                continue
            load = functools.partial(load_one, name, old.path, precision=old.precision,
                                     engine=old.engine, device=old.device)
            try:
                new = await loop.run_in_executor(None, load)
            except Exception as err:  # any failure to load leaves the old model serving
                line = _one_line(err)
                log.error("reload of %s from %s failed, the old model serves on: %s", name, old.path,
                          line, exc_info=not isinstance(err, InputError))
                state.reload_errors[name] = line
                state.metrics.reloads[(name, "failed")] += 1
                report["failed"][name] = line
                continue
            state.swap(new)
            state.reload_errors.pop(name, None)
            state.metrics.reloads[(name, "loaded")] += 1
            report["reloaded"].append(name)
            log.info("reloaded %s from %s", name, old.path)
    return report
