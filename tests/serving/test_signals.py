"""The server as a process under steady load, with the signals an operator sends: a real
``transformer serve`` on a free loopback port, clients that send a request as soon as their last
one is answered, and the signal in the middle.

- SIGHUP with a retrained model written in place: no request fails, and the answers switch to
  the new model (every request sent after the first new answer arrived gets the new one); then a
  broken model in its place: the new one serves on and /v1/models says why.
- SIGTERM: the process stops accepting, answers every request it let in (those in flight at the
  signal included), and exits 0 within --drain-s; the number it says it answered is the number
  the clients got.
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

import pytest

httpx = pytest.importorskip("httpx")

from helpers import LOADED_S, start_server  # noqa: E402
from transformer.data.builtin_task import english_number  # noqa: E402

TEXTS = [english_number(n) for n in (7, 42, 365, 1999)]


@dataclass
class Load:
    """``clients`` threads, each posting ``body`` to /v1/translate as soon as its last answer came,
    until ``stop`` is set or the server refuses it a connection. ``results``: (sent, received,
    status, texts or error) per request, on the monotonic clock."""

    url: str
    body: dict
    clients: int = 3
    results: list = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list = field(default_factory=list)

    def start(self) -> Load:
        for _ in range(self.clients):
            thread = threading.Thread(target=self._client, daemon=True)
            thread.start()
            self.threads.append(thread)
        return self

    def _client(self) -> None:
        with httpx.Client(base_url=self.url, timeout=LOADED_S) as http:
            while not self.stop.is_set():
                sent = time.monotonic()
                try:
                    got = http.post("/v1/translate", json=self.body)
                except httpx.TransportError as err:  # refused: the server is going
                    self.results.append((sent, time.monotonic(), None, repr(err)))
                    return
                texts = [t["text"] for t in got.json()["translations"]] if got.status_code == 200 else got.text
                self.results.append((sent, time.monotonic(), got.status_code, texts))

    def answered(self) -> list:
        return [r for r in self.results if r[2] is not None]

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(LOADED_S)


def wait_for(condition, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + LOADED_S
    while not condition():
        assert time.monotonic() < deadline, what
        assert proc is None or proc.poll() is None, f"{what}: the server exited with {proc.returncode}"
        time.sleep(0.01)


def test_sighup_under_load_swaps_the_model_without_a_failed_request(tmp_path, write_translator,
                                                                   translate_alone):
    run_dir = write_translator(tmp_path / "m", 0)
    old = translate_alone(run_dir, TEXTS)
    proc, url = start_server(tmp_path, "--model", f"m={run_dir}", "--batch-wait-ms", "5")
    load = Load(url, {"model": "m", "texts": TEXTS, "beam": 1}).start()
    try:
        wait_for(lambda: sum(r[3] == old for r in load.answered()) >= 5, "no answers from the old model")
        write_translator(run_dir, 1)  # the retrained model, written in place
        new = translate_alone(run_dir, TEXTS)
        assert new != old
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: any(r[3] == new for r in load.answered()), "the answers never switched", proc)
        switched = min(r[1] for r in load.answered() if r[3] == new)
        wait_for(lambda: sum(r[0] > switched for r in load.answered()) >= 5, "no answers after the switch")

        # a broken model in its place: the new one serves on, and /v1/models says why
        (run_dir / "model.safetensors").write_bytes(b"broken")
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "reload_error" in httpx.get(url + "/v1/models").json()["models"][0],
                 "the failed reload never showed", proc)
        broken_at = time.monotonic()
        wait_for(lambda: sum(r[0] > broken_at for r in load.answered()) >= 3, "no answers after it")
    finally:
        load.join()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(LOADED_S) == 0
    results = load.results
    assert all(r[2] == 200 for r in results), [r for r in results if r[2] != 200][:3]
    assert all(r[3] in (old, new) for r in results)
    assert all(r[3] == new for r in results if r[0] > switched)
    assert "model.safetensors" in (tmp_path / "serve.err").read_text()


def test_sigterm_under_load_answers_every_request_let_in_then_exits_0(tmp_path, translation_dir):
    """Heavy requests one at a time (so several wait in the queue at the signal; a queue bound
    that sheds none of them): every response the clients got is a 200, at least one request sent before the signal was answered after it,
    the process exits 0 within --drain-s, and it answered as many requests as the clients got."""
    drain_s = 60.0
    proc, url = start_server(tmp_path, "--model", f"m={translation_dir}", "--no-batching",
                             "--drain-s", str(drain_s), "--max-queue-wait-s", str(drain_s))
    seen = 1  # the /health that answered
    body = {"model": "m", "texts": [english_number(n) for n in range(1000, 1064)], "beam": 8}
    load = Load(url, body, clients=4).start()
    try:
        wait_for(lambda: len(load.answered()) >= 4, "no answers")

        def in_flight() -> int:
            nonlocal seen
            text = httpx.get(url + "/metrics").text
            seen += 1
            return int(re.search(r"^transformer_requests_in_flight (\d+)$", text, re.M)[1])

        wait_for(lambda: in_flight() >= 3, "never two requests in flight")  # this one and two
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(drain_s + 30)
        took = time.monotonic() - signalled
    finally:
        load.join()
        if proc.poll() is None:
            proc.kill()
    assert status == 0 and took < drain_s
    answered = load.answered()
    assert answered and all(r[2] == 200 for r in answered)
    assert any(r[0] < signalled < r[1] for r in answered)  # in flight at the signal, answered
    assert all(r[2] is not None or r[0] > signalled - 1 for r in load.results)  # refused: only at the end
    log = (tmp_path / "serve.err").read_text()
    said = re.search(r"stopped: every request let in was answered \((\d+)\)", log)
    assert said, log
    assert int(said[1]) == len(answered) + seen
