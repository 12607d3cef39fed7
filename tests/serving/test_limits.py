"""The server's limits: each at its edge (n answered, n+1 refused with one line naming the field
and the limit), set by ``serve --max-texts/--max-chars/--max-beam/--max-output-tokens`` over the
defaults of one settings class, shown in /v1/models and on the page."""

from __future__ import annotations

import argparse

import pytest

from transformer.cli import build_parser, main
from transformer.config.decoding import DecodeOptions
from transformer.data.builtin_task import english_number
from transformer.inference.translator import Translator
from transformer.model_dir import load_model_dir
from transformer.serving.settings import Limits, ServeSettings

SMALL = Limits(max_texts=3, max_chars=12, max_beam=2, max_output_tokens=4)


def error_of(response, status):
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error"} and "\n" not in response.json()["error"]
    return response.json()["error"]


@pytest.fixture
def small(make_client):
    return make_client(limits=SMALL)


T = "forty two"  # 9 characters


@pytest.mark.parametrize(("path", "ok", "over", "words"), [
    ("/v1/translate", {"texts": [T] * 3}, {"texts": [T] * 4}, ["texts", "at most 3"]),
    ("/v1/translate", {"texts": [T, "x" * 12]}, {"texts": [T, "x" * 13]}, ["texts[1]", "12 characters"]),
    ("/v1/translate", {"texts": [T], "beam": 2}, {"texts": [T], "beam": 3}, ["beam", "at most 2"]),
    ("/v1/translate", {"texts": [T], "beam": 2, "nbest": 2}, {"texts": [T], "beam": 2, "nbest": 3},
     ["nbest", "at most 2"]),
    ("/v1/translate", {"texts": [T], "max_len": 4}, {"texts": [T], "max_len": 5}, ["max_len", "at most 4"]),
    ("/v1/classify", {"model": "labels", "texts": [T] * 3}, {"model": "labels", "texts": [T] * 4},
     ["texts", "at most 3"]),
    ("/v1/classify", {"model": "labels", "texts": ["x" * 12]}, {"model": "labels", "texts": ["x" * 13]},
     ["texts[0]", "12"]),
    ("/v1/attention", {"text": "x" * 12}, {"text": "x" * 13}, ["text", "12 characters"]),
    ("/v1/attention", {"text": T, "target": "y" * 12}, {"text": T, "target": "y" * 13}, ["target", "12"]),
    ("/v1/score", {"sources": [T] * 3, "targets": ["42"] * 3}, {"sources": [T] * 4, "targets": ["42"] * 4},
     ["sources", "at most 3"]),
    ("/v1/score", {"sources": [T], "targets": ["x" * 12]}, {"sources": [T], "targets": ["x" * 13]},
     ["targets[0]", "12 characters"]),
], ids=lambda v: v if isinstance(v, str) else None)
def test_each_limit_at_its_edge(small, path, ok, over, words):
    base = {"model": "numbers", "beam": 1} if path == "/v1/translate" else {"model": "numbers"}
    assert small.post(path, json={**base, **ok}).status_code == 200
    line = error_of(small.post(path, json={**base, **over}), 422)
    for word in words:
        assert word in line, line


def test_the_default_limits_are_todays(client):
    """64 texts of 1000 characters, beam 16, 512 output tokens: 64 pass, 65 do not, and so on."""
    base = {"model": "numbers", "beam": 1}
    assert client.post("/v1/translate", json={**base, "texts": ["one"] * 64}).status_code == 200
    error_of(client.post("/v1/translate", json={**base, "texts": ["one"] * 65}), 422)
    assert client.post("/v1/translate", json={**base, "texts": ["x" * 1000]}).status_code == 200
    error_of(client.post("/v1/translate", json={**base, "texts": ["x" * 1001]}), 422)
    assert client.post("/v1/translate", json={**base, "beam": 16, "texts": ["one"]}).status_code == 200
    error_of(client.post("/v1/translate", json={**base, "beam": 17, "texts": ["one"]}), 422)
    assert client.post("/v1/translate", json={**base, "max_len": 512, "texts": ["one"]}).status_code == 200
    error_of(client.post("/v1/translate", json={**base, "max_len": 513, "texts": ["one"]}), 422)


def test_a_raised_limit_lets_more_in(make_client):
    client = make_client(limits=Limits(max_texts=70, max_beam=20))
    body = {"model": "numbers", "texts": ["one"] * 70, "beam": 1}
    assert client.post("/v1/translate", json=body).status_code == 200
    assert client.post("/v1/translate", json={**body, "texts": ["one"], "beam": 20}).status_code == 200


def test_max_output_tokens_caps_a_request_without_max_len(make_client, translation_dir):
    """A request naming no max_len is decoded with max_len = --max-output-tokens: what the
    Translator gives with that max_len, not what it gives without (longer, for this model)."""
    texts = [english_number(n) for n in (987654, 123456, 80808)]
    loaded = load_model_dir(translation_dir)

    def alone(**options):
        return [t.text for t in Translator.from_loaded(loaded, options=DecodeOptions(
            max_len_a=0.5, max_len_b=3, beam_size=1, **options)).translate(texts)]

    capped, free = alone(max_len=2), alone()
    assert capped != free  # else the test could not tell
    client = make_client(limits=Limits(max_output_tokens=2))
    got = client.post("/v1/translate", json={"model": "numbers", "texts": texts, "beam": 1})
    assert [t["text"] for t in got.json()["translations"]] == capped


def test_the_models_route_and_the_page_show_the_limits(small):
    shown = small.get("/v1/models").json()["limits"]
    assert shown == ServeSettings(limits=SMALL).describe()
    assert {k: shown[k] for k in ("max_texts", "max_chars", "max_beam", "max_output_tokens")} == \
        {"max_texts": 3, "max_chars": 12, "max_beam": 2, "max_output_tokens": 4}
    page, script = small.get("/").text, small.get("/static/app.js").text
    assert 'id="limits"' in page
    for name in ("max_texts", "max_chars", "max_beam", "max_output_tokens", "timeout_s"):
        assert f"limits.{name}" in script


def parse_serve(argv):
    args = build_parser().parse_args(["serve", "--model", "m=DIR", *argv])
    assert isinstance(args, argparse.Namespace)
    return args


def test_flags_override_the_defaults_and_nothing_else():
    from transformer.cli.serve import settings_from

    assert settings_from(parse_serve([])) == ServeSettings()
    got = settings_from(parse_serve(["--max-texts", "3", "--max-chars", "12", "--max-beam", "2",
                                     "--max-output-tokens", "4", "--timeout-s", "2.5",
                                     "--max-queue-wait-s", "0.5", "--drain-s", "7",
                                     "--batch-wait-ms", "0", "--batch-tokens", "100",
                                     "--max-body-bytes", "99"]))
    assert got == ServeSettings(limits=SMALL, timeout_s=2.5, max_queue_wait_s=0.5, drain_s=7.0,
                                max_wait_ms=0.0, max_batch_tokens=100, max_body_bytes=99)


def test_the_help_shows_the_defaults_of_the_settings():
    """The parser holds no default of its own: each flag's help quotes the settings' value."""
    from transformer.cli.serve import DEFAULT

    parser = build_parser()._subparsers._group_actions[0].choices["serve"]
    limits = DEFAULT.limits
    for flag, value in (("--max-texts", limits.max_texts), ("--max-chars", limits.max_chars),
                        ("--max-beam", limits.max_beam), ("--max-output-tokens", limits.max_output_tokens),
                        ("--timeout-s", f"{DEFAULT.timeout_s:g}"), ("--drain-s", f"{DEFAULT.drain_s:g}"),
                        ("--max-queue-wait-s", f"{DEFAULT.max_queue_wait_s:g}"),
                        ("--batch-wait-ms", f"{DEFAULT.max_wait_ms:g}"),
                        ("--batch-tokens", DEFAULT.max_batch_tokens),
                        ("--max-body-bytes", DEFAULT.max_body_bytes)):
        action = parser._option_string_actions[flag]
        assert action.default is None and f"default {value}" in action.help, flag


@pytest.mark.parametrize(("argv", "words"), [
    (["--max-texts", "0"], ["--max-texts", "positive", "0"]),
    (["--max-chars", "-1"], ["--max-chars"]),
    (["--max-beam", "0"], ["--max-beam"]),
    (["--max-output-tokens", "0"], ["--max-output-tokens"]),
    (["--timeout-s", "0"], ["--timeout-s"]),
    (["--timeout-s", "nan"], ["--timeout-s"]),
    (["--max-queue-wait-s", "-1"], ["--max-queue-wait-s"]),
    (["--drain-s", "inf"], ["--drain-s"]),
    (["--batch-wait-ms", "-1"], ["--batch-wait-ms"]),
    (["--max-body-bytes", "0"], ["--max-body-bytes"]),
])
def test_a_bad_setting_names_its_flag(capsys, translation_dir, argv, words):
    """Refused before any model is loaded: one line, exit status 2."""
    assert main(["serve", "--model", str(translation_dir.parent / "missing"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("transformer: error: ") and "\n" not in err
    for word in words:
        assert word in err, err


def test_serve_hands_the_flags_to_the_app(monkeypatch, capsys, translation_dir):
    from fastapi.testclient import TestClient

    from transformer.serving import process

    apps = []
    monkeypatch.setattr(process, "serve_until_stopped", lambda app, **kw: apps.append(app) or 0)
    assert main(["serve", "--model", str(translation_dir), "--precision", "fp32",
                 "--max-texts", "2", "--max-beam", "3"]) == 0
    with TestClient(apps[0]) as client:
        limits = client.get("/v1/models").json()["limits"]
        assert (limits["max_texts"], limits["max_beam"]) == (2, 3)
        body = {"model": translation_dir.name, "texts": ["one", "two"], "beam": 3}
        assert client.post("/v1/translate", json=body).status_code == 200
        assert client.post("/v1/translate", json={**body, "texts": ["a"] * 3}).status_code == 422
