"""The server as a process: uvicorn on one address, with the signals an operator sends.

    status = serve_until_stopped(create_app(served, settings=settings), host="127.0.0.1", port=8000)

- SIGHUP reloads the models whose directories changed (:func:`~transformer.serving.reload.reload_changed`),
  serving on meanwhile.
- SIGTERM (or Ctrl-C) drains: the listening socket closes at once (new connections are refused,
  idle keep-alive ones closed), every request already let in gets its answer, then the process
  ends. Uvicorn waits ``settings.drain_s`` at most for them; the status is 0 when all were
  answered, 1 when the drain ran out first (how many is logged). A second Ctrl-C ends at once.

Uvicorn's own handling would end the process by raising SIGTERM again once drained (status 143);
here the signal is handled and the status says how the drain went.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn

from transformer.errors import InputError
from transformer.serving.reload import reload_changed

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    """Uvicorn's server with SIGTERM and SIGINT handled (a drain, then a normal return) and SIGHUP
    as a reload of ``state``."""

    def __init__(self, config: uvicorn.Config, *, state: Any) -> None:
        super().__init__(config)
        self.state = state
        self._reloads: set[asyncio.Task] = set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self.handle_exit, signum, None)
        loop.add_signal_handler(signal.SIGHUP, self._hangup)
        try:
            yield
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                loop.remove_signal_handler(signum)

    def handle_exit(self, sig: int, frame: Any) -> None:
        if not self.should_exit:
            log.info("%s: draining (at most %g s), then stopping", signal.Signals(sig).name,
                     self.config.timeout_graceful_shutdown)
        super().handle_exit(sig, frame)

    def _hangup(self) -> None:
        log.info("SIGHUP: reloading the models whose directories changed")
        task = asyncio.ensure_future(self._reload())
        self._reloads.add(task)
        task.add_done_callback(self._reloads.discard)

    async def _reload(self) -> None:
        report = await reload_changed(self.state)
        log.info("reload: %d reloaded, %d unchanged, %d failed", len(report["reloaded"]),
                 len(report["unchanged"]), len(report["failed"]))


def serve_until_stopped(app: Any, *, host: str, port: int) -> int:
    """Serve ``app`` (what :func:`~transformer.serving.app.create_app` returns) on ``host:port``
    until SIGTERM or Ctrl-C, then drain; 0 when every request let in was answered, else 1."""
    state = app.fastapi.state.server
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=state.settings.drain_s)
    server = _Server(config, state=state)
    try:
        server.run()
    except SystemExit:  # uvicorn's way out of a failed start, its reason logged
        if server.started:
            raise
        raise InputError(f"--host {host} --port {port}: could not serve there (see the error "
                         "above)") from None
    unanswered = state.metrics.unanswered
    answered = sum(state.metrics.requests.values()) - unanswered
    if unanswered:
        log.error("stopped: --drain-s %g s ran out; %d requests were not answered (%d were)",
                  state.settings.drain_s, unanswered, answered)
        return 1
    log.info("stopped: every request let in was answered (%d)", answered)
    return 0
