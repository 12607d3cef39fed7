"""``transformer serve``'s bad flags: one line on stderr, exit status 2, nothing served."""

from __future__ import annotations

import pytest

from transformer.cli import main
from transformer.serving.models import parse_model_specs


def served_apps(monkeypatch) -> list:
    """The apps ``serve`` would run, kept instead of served (``serve`` then returns 0)."""
    from transformer.serving import process

    apps = []
    monkeypatch.setattr(process, "serve_until_stopped", lambda app, **kw: apps.append(app) or 0)
    return apps


def test_model_specs_are_named():
    assert parse_model_specs(["runs/en-de/", "fr=runs/x"]) == {"en-de": "runs/en-de/", "fr": "runs/x"}


@pytest.mark.parametrize(("argv", "words"), [
    (["--model", "MISSING"], ["MISSING"]),
    (["--model", "a=DIR", "--model", "a=DIR2"], ["'a'", "twice"]),
    (["--model", "=DIR"], ["[NAME=]RUN_DIR"]),
    (["--model", "DIR", "--port", "70000"], ["--port", "70000"]),
    (["--model", "DIR", "--batch-tokens", "0"], ["--batch-tokens"]),
])
def test_bad_flags(capsys, tmp_path, argv, words):
    argv = [a.replace("DIR", str(tmp_path / "none")) if "DIR" in a else a for a in argv]
    assert main(["serve", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("transformer: error: ") and "\n" not in err and "Traceback" not in err
    for word in words:
        assert word in err, err


@pytest.mark.parametrize(("flag", "env", "key"), [
    ([], "from-env", "from-env"),  # $TRANSFORMER_API_KEY alone protects the server
    (["--api-key", "from-flag"], "from-env", "from-flag"),  # the flag wins
    (["--api-key", "from-flag"], None, "from-flag"),
])
def test_the_api_key_from_the_flag_or_the_environment(monkeypatch, capsys, translation_dir, flag, env,
                                                      key):
    """The app ``serve`` hands to uvicorn refuses the API without the key it was given, by flag or
    by ``$TRANSFORMER_API_KEY``, and answers with it."""
    from fastapi.testclient import TestClient

    from transformer.cli.serve import API_KEY_ENV

    apps = served_apps(monkeypatch)
    if env is None:
        monkeypatch.delenv(API_KEY_ENV, raising=False)
    else:
        monkeypatch.setenv(API_KEY_ENV, env)
    assert main(["serve", "--model", str(translation_dir), "--precision", "fp32", *flag]) == 0
    (app,) = apps
    with TestClient(app) as client:
        assert client.get("/v1/models").status_code == 401
        assert client.get("/v1/models", headers={"X-API-Key": "wrong"}).status_code == 401
        assert client.get("/v1/models", headers={"X-API-Key": key}).status_code == 200
        assert client.get("/health").status_code == 200


def test_no_key_anywhere_serves_openly(monkeypatch, capsys, translation_dir):
    from fastapi.testclient import TestClient

    from transformer.cli.serve import API_KEY_ENV

    apps = served_apps(monkeypatch)
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    assert main(["serve", "--model", str(translation_dir), "--precision", "fp32"]) == 0
    with TestClient(apps[0]) as client:
        assert client.get("/v1/models").status_code == 200


@pytest.mark.parametrize(("spec", "words"), [
    ("en-de", ["--languages 'en-de'", "NAME=SOURCE:TARGET"]),
    ("x=en", ["NAME=SOURCE:TARGET"]),
    ("x=en:", ["NAME=SOURCE:TARGET"]),
    ("x=:de", ["NAME=SOURCE:TARGET"]),
    ("x=en:de,de", ["twice"]),
    ("other=en:de", ["--languages other", "no --model", "numbers"]),
])
def test_bad_languages(capsys, translation_dir, spec, words):
    assert main(["serve", "--model", f"numbers={translation_dir}", "--languages", spec]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("transformer: error: ") and "\n" not in err
    for word in words:
        assert word in err, err


def test_languages_are_stated_lowercased(monkeypatch, translation_dir):
    from transformer.serving.settings import ModelLanguages

    apps = served_apps(monkeypatch)
    assert main(["serve", "--model", f"numbers={translation_dir}", "--languages", "numbers=EN:De,fr"]) == 0
    assert apps[0].fastapi.state.settings.model_languages == (ModelLanguages("numbers", "en", ("de", "fr")),)
