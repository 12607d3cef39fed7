"""Reload without a restart (``POST /v1/admin/reload``, what SIGHUP does): a changed directory is
loaded and swapped in, requests already queued finish on the old model, an unchanged one is not
read again, a broken one leaves the old model serving and says why in /v1/models and the log."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from transformer.data.builtin_task import english_number
from transformer.model_dir import load_model_dir
from transformer.serving.models import fingerprint, load_served
from transformer.serving.settings import ApiKey

TEXTS = [english_number(n) for n in (7, 42, 365, 1999)]


@pytest.fixture
def run_dir(tmp_path, write_translator):
    return write_translator(tmp_path / "m", 0)


@pytest.fixture
def expected(translate_alone):
    return lambda path: translate_alone(path, TEXTS)


@pytest.fixture
def reloading_client(run_dir, make_client):
    """``reloading_client(**settings)``: a client of the model directory ``run_dir`` alone."""
    return lambda **settings: make_client(load_served({"m": str(run_dir)}, precision="fp32"),
                                          **settings)


def texts_of(client):
    got = client.post("/v1/translate", json={"model": "m", "texts": TEXTS, "beam": 1})
    assert got.status_code == 200, got.text
    return [t["text"] for t in got.json()["translations"]]


def test_a_retrained_model_is_swapped_in(reloading_client, run_dir, write_translator, expected):
    client = reloading_client()
    old = expected(run_dir)
    assert texts_of(client) == old
    assert client.post("/v1/admin/reload").json() == {"reloaded": [], "unchanged": ["m"], "failed": {}}
    write_translator(run_dir, 1)
    new = expected(run_dir)
    assert new != old  # else the test could not tell
    assert client.post("/v1/admin/reload").json() == {"reloaded": ["m"], "unchanged": [], "failed": {}}
    assert texts_of(client) == new
    assert 'transformer_reloads_total{model="m",result="loaded"} 1' in client.get("/metrics").text
    assert client.post("/v1/admin/reload").json()["unchanged"] == ["m"]  # read once, not again


def test_requests_in_flight_finish_on_the_old_model(reloading_client, run_dir, write_translator, expected,
                                                    monkeypatch):
    """The old model is busy with one request and has another queued when the new one is
    swapped in: both are answered by the old model; a request after the swap by the new one."""
    client = reloading_client(max_wait_ms=0, batching=False)
    state = client.app.fastapi.state.server
    old_model, old = state.served["m"], expected(run_dir)
    release, batches = threading.Event(), []
    run = old_model.translate_batch

    def held(payloads):
        batches.append(len(payloads))
        release.wait(60)
        return run(payloads)

    old_batcher = state.batchers["m"]
    monkeypatch.setattr(old_batcher, "run", held)
    with ThreadPoolExecutor(2) as pool:
        running = pool.submit(texts_of, client)
        deadline = time.monotonic() + 60
        while not batches:
            assert time.monotonic() < deadline, "the first request never ran"
            time.sleep(0.005)
        queued = pool.submit(texts_of, client)
        while old_batcher.queued != 1:
            assert time.monotonic() < deadline, "the second request never queued"
            time.sleep(0.005)
        write_translator(run_dir, 1)
        assert client.post("/v1/admin/reload").json()["reloaded"] == ["m"]
        new = expected(run_dir)
        assert texts_of(client) == new != old  # the new model answers at once
        release.set()
        assert running.result() == old and queued.result() == old


def test_a_broken_directory_leaves_the_old_model_serving(reloading_client, run_dir, write_translator,
                                                       expected, caplog):
    client = reloading_client()
    old = expected(run_dir)
    good = run_dir.parent / "good"
    shutil.copytree(run_dir, good)
    (run_dir / "model.safetensors").write_bytes(b"not weights")
    with caplog.at_level(logging.ERROR, logger="transformer.serving.reload"):
        report = client.post("/v1/admin/reload").json()
    assert report["reloaded"] == [] and list(report["failed"]) == ["m"]
    line = report["failed"]["m"]
    assert "model.safetensors" in line and "\n" not in line
    assert any("reload of m" in m and line in m for m in caplog.messages)
    shown = client.get("/v1/models").json()["models"][0]
    assert shown["name"] == "m" and shown["reload_error"] == line
    assert texts_of(client) == old
    assert 'transformer_reloads_total{model="m",result="failed"} 1' in client.get("/metrics").text
    # mended (another model in its place): it loads, and the error goes
    write_translator(run_dir, 2)
    assert client.post("/v1/admin/reload").json()["reloaded"] == ["m"]
    assert "reload_error" not in client.get("/v1/models").json()["models"][0]
    assert texts_of(client) == expected(run_dir) != old


def test_a_directory_that_went_away_is_reported(reloading_client, run_dir, expected):
    client = reloading_client()
    old = expected(run_dir)
    shutil.rmtree(run_dir)
    assert list(client.post("/v1/admin/reload").json()["failed"]) == ["m"]
    assert texts_of(client) == old


def test_reload_is_behind_the_api_key(reloading_client):
    client = reloading_client(api_keys=(ApiKey("k"),))
    assert client.post("/v1/admin/reload").status_code == 401
    assert client.post("/v1/admin/reload", headers={"X-API-Key": "k"}).status_code == 200


def test_a_reload_never_changes_the_callers_models(served, make_client, translation_dir):
    """The app swaps in its own copy of the models it was given (tests share theirs)."""
    client = make_client()
    state = client.app.fastapi.state.server
    assert state.served == served and state.served is not served


def test_the_fingerprint_sees_every_file_the_loader_reads(run_dir, write_translator):
    """Rewritten weights, a rewritten config, a new tokenizer directory, a file gone: each changes
    it; reading the directory does not."""
    before = fingerprint(run_dir)
    load_model_dir(run_dir)
    assert fingerprint(run_dir) == before
    names = [entry[0] for entry in before]
    assert names[:2] == ["config.json", "model.safetensors"]
    assert any(name.startswith("tokenizer/") for name in names)
    for change in (lambda: (run_dir / "model.safetensors").write_bytes(
                       (run_dir / "model.safetensors").read_bytes()),
                   lambda: (run_dir / "config.json").write_text((run_dir / "config.json").read_text() + " "),
                   lambda: write_translator(run_dir, 0),
                   lambda: (run_dir / "config.json").unlink()):
        now = fingerprint(run_dir)
        change()
        assert fingerprint(run_dir) != now
