"""The page in a real browser: headless Chromium (Debian's package, driven by Selenium through its
matching chromedriver) opens the page of a real ``transformer serve`` on a loopback port, translates
a sentence with a small trained model, checks the attention heat map (one row per target piece, one
column per source piece), exports a PNG and saves a screenshot.

``SERVE_SCREENSHOT=docs/serve-page.png`` keeps the screenshot (``make screenshot``);
``SERVE_MODEL=NAME=RUN_DIR`` and ``SERVE_SENTENCE=...`` serve another translation model instead of
the one trained here (the README's picture: the Multi30k model). Without Chromium the test skips,
except under CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from transformer.cli import main

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SENTENCE = os.environ.get("SERVE_SENTENCE") or "three thousand four hundred fifty-six"


def need_browser():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium")
    if missing:
        message = f"the browser test needs {', '.join(missing)} (make browser installs them)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def trained_numbers(tmp_path_factory):
    """``NAME=RUN_DIR``: a small model trained for a few seconds on the built-in number-words task
    (or ``$SERVE_MODEL``)."""
    from transformer.data.builtin_task import number_task_splits

    if os.environ.get("SERVE_MODEL"):
        return os.environ["SERVE_MODEL"]
    splits = number_task_splits(0, train_size=2000, valid_size=20, test_size=10, max_number=9999)
    root = tmp_path_factory.mktemp("numbers")
    flags = []
    for split in ("train", "valid"):
        for side, lines in (("src", splits[split].src), ("tgt", splits[split].tgt)):
            path = root / f"{split}.{side}"
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            flags += [f"--{split}-{side}", str(path)]
    run = root / "numbers"
    code = main(["train", *flags, "--preset", "tiny", "--d-model", "32", "--d-ff", "64", "--num-heads", "2",
                 "--layers", "2", "--vocab-size", "80", "--no-byte-fallback", "--max-tokens", "1024",
                 "--bleu-sample", "8", "--threads", "1", "--no-progress", "--max-steps", "120",
                 "--eval-every", "120", "--out", str(run)])
    assert code == 0
    return f"numbers={run}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(trained_numbers):
    """``transformer serve`` in a subprocess on a free loopback port; yields its base URL."""
    import httpx

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "transformer", "serve", "--model", trained_numbers,
                             "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not start in 60 s"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def browser(tmp_path):
    need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # the network is closed here: without these Chromium stalls on refused connections
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1500,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


def wait_for(driver, script, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for: {script}")


def test_page_translates_shows_attention_and_exports(server, browser, tmp_path, trained_numbers):
    import httpx
    from selenium.webdriver.common.by import By

    model = trained_numbers.partition("=")[0]
    browser.get(server + "/")
    wait_for(browser, "return document.querySelectorAll('#translate-model option').length > 0")
    browser.find_element(By.ID, "source").send_keys(SENTENCE)
    browser.find_element(By.ID, "translate").click()
    translated = wait_for(browser, "const t = document.querySelector('td.translation'); return t && t.textContent")
    want = httpx.post(server + "/v1/translate", json={"model": model, "texts": [SENTENCE]}).json()
    assert translated == want["translations"][0]["text"] and translated

    browser.find_element(By.ID, "explore").click()
    wait_for(browser, "return document.querySelector('svg#view.heatmap')")
    att = httpx.post(server + "/v1/attention", json={"model": model, "text": SENTENCE}).json()
    rows, cols = len(att["target_tokens"]), len(att["source_tokens"])
    view = browser.find_element(By.CSS_SELECTOR, "svg#view")
    assert (int(view.get_attribute("data-rows")), int(view.get_attribute("data-cols"))) == (rows, cols)
    assert len(view.find_elements(By.CSS_SELECTOR, "rect.cell")) == rows * cols
    row_labels = browser.execute_script(
        "return [...document.querySelectorAll('svg#view .row-label')].map(t => t.textContent)")
    col_labels = browser.execute_script(
        "return [...document.querySelectorAll('svg#view .col-label')].map(t => t.textContent)")
    assert row_labels == att["target_tokens"] and col_labels == att["source_tokens"]

    browser.find_element(By.ID, "export-png").click()
    exported = wait_for(browser, "return window.lastExport && window.lastExport.format === 'png' && window.lastExport")
    header, data = exported["dataUrl"].split(",", 1)
    assert header == "data:image/png;base64"
    png = base64.b64decode(data)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and exported["width"] > 100 and exported["height"] > 100
    (tmp_path / "attention.png").write_bytes(png)

    # the pointer on the translation's first word: the picture shows its aligned source word lit
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser).move_to_element(
        browser.find_element(By.CSS_SELECTOR, 'td.translation .w[data-j="0"]')).perform()
    shot = Path(os.environ.get("SERVE_SCREENSHOT") or tmp_path / "serve-page.png")
    shot.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def test_page_shows_the_attention_of_one_sentence_at_a_time(server, browser, trained_numbers):
    import httpx
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    model = trained_numbers.partition("=")[0]
    text = "forty two. seven hundred and one."
    browser.get(server + "/")
    wait_for(browser, "return document.querySelectorAll('#attention-model option').length > 0")
    box = browser.find_element(By.ID, "attention-text")
    box.clear()
    box.send_keys(text)
    browser.find_element(By.ID, "attention").click()
    wait_for(browser, "return !document.getElementById('att-sentence-box').hidden")
    options = browser.execute_script(
        "return [...document.querySelectorAll('#att-sentence option')].map(o => o.value)")
    assert options == ["1", "2"]
    Select(browser.find_element(By.ID, "att-sentence")).select_by_value("2")
    want = httpx.post(server + "/v1/attention",
                      json={"model": model, "text": text, "sentence": 2}).json()
    cols = wait_for(browser, "const v = document.querySelector('svg#view');"
                             f"return v && v.getAttribute('data-cols') === '{len(want['source_tokens'])}'"
                             " && [...v.querySelectorAll('.col-label')].map(t => t.textContent)")
    assert cols == want["source_tokens"] and "seven" in "".join(cols)


def _page_translation(browser):
    return browser.execute_script(
        "const t = document.querySelector('td.translation .text'); return t && t.textContent")


def test_page_completes_a_typed_prefix_keeps_glossary_terms_and_shows_alignments(
        server, browser, trained_numbers):
    """The translate card's steering, each checked against the HTTP API's own answer: a target
    prefix typed key by key is completed without a click (the last keystroke's answer shown), a
    glossary line forces its target term, and pointing at a translated word lights up the source
    words its alignment pairs name (and the other way round)."""
    import httpx
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    if os.environ.get("SERVE_MODEL"):
        pytest.skip("its prefix and glossary are the number-words model's")
    model = trained_numbers.partition("=")[0]

    def api(**extra):
        body = {"model": model, "texts": [SENTENCE], "beam": 4, "alignments": True, **extra}
        answer = httpx.post(server + "/v1/translate", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()["translations"][0]

    browser.get(server + "/")
    wait_for(browser, "return document.querySelectorAll('#translate-model option').length > 0")
    browser.find_element(By.ID, "source").send_keys(SENTENCE)

    prefix = "sieben hundert"  # two words, so the alignment below has at least two to point at
    want = api(target_prefix=prefix)
    assert want["text"].startswith(prefix) and want["text"] != api()["text"]
    browser.find_element(By.ID, "target-prefix").send_keys(prefix)  # no click: typing is enough
    shown = wait_for(browser, "const t = document.querySelector('td.translation .text');"
                              f"return t && t.textContent === {want['text']!r} && t.textContent")
    time.sleep(1.0)  # answers to earlier keystrokes, if any came late, must not replace it
    assert _page_translation(browser) == shown

    pairs = {tuple(p) for p in want["alignments"]}
    assert len({j for _, j in pairs}) >= 2, want
    row = browser.find_element(By.CSS_SELECTOR, "#translations tr")
    lit = "return [...arguments[0].querySelectorAll('.w.aligned')].map(w => Number(w.getAttribute(arguments[1])))"
    for j in sorted({j for _, j in pairs}):
        ActionChains(browser).move_to_element(row.find_element(By.CSS_SELECTOR, f'.w[data-j="{j}"]')).perform()
        assert sorted(browser.execute_script(lit, row, "data-i")) == sorted(i for i, jj in pairs if jj == j)
    for i in sorted({i for i, _ in pairs}):
        ActionChains(browser).move_to_element(row.find_element(By.CSS_SELECTOR, f'.w[data-i="{i}"]')).perform()
        assert sorted(browser.execute_script(lit, row, "data-j")) == sorted(j for ii, j in pairs if ii == i)

    browser.find_element(By.ID, "target-prefix").clear()
    glossary = browser.find_element(By.ID, "glossary")
    glossary.send_keys("four = acht")
    want = api(glossary=[["four", "acht"]])
    assert "acht" in want["text"]
    browser.find_element(By.ID, "translate").click()
    wait_for(browser, "const t = document.querySelector('td.translation .text');"
                      f"return t && t.textContent === {want['text']!r}")

    glossary.clear()
    glossary.send_keys("four without a target")
    browser.find_element(By.ID, "translate").click()
    error = wait_for(browser, "const s = document.getElementById('translate-status');"
                              "return s.classList.contains('error') && s.textContent")
    assert error.startswith("glossary line 1")


def test_page_shows_a_paragraphs_first_sentence_before_the_last_is_done(server, browser, trained_numbers):
    """A paragraph of twelve sentences, translated through ``/v1/translate/stream``: the page
    shows the first sentence's translation alone (the rest not yet decoded), and at the end the
    whole answer, equal to ``/v1/translate``'s."""
    import httpx
    from selenium.webdriver.common.by import By

    if os.environ.get("SERVE_MODEL"):
        pytest.skip("its sentences are the number-words model's")
    model = trained_numbers.partition("=")[0]
    paragraph = " ".join(f"{n} hundred and {m}." for n, m in zip(
        ["one", "two", "three", "four", "five", "six"] * 2, ["seven", "eight", "nine"] * 4, strict=True))
    streamed = httpx.post(server + "/v1/translate/stream", json={"model": model, "texts": [paragraph]},
                          timeout=60).text
    first = json.loads(streamed.split("\n\n")[0].split("\n")[1][len("data: "):])
    assert first["index"] == 0 and first["source"] == "one hundred and seven."
    want = httpx.post(server + "/v1/translate", json={"model": model, "texts": [paragraph], "beam": 4,
                                                      "alignments": True}, timeout=60).json()

    browser.get(server + "/")
    wait_for(browser, "return document.querySelectorAll('#translate-model option').length > 0")
    browser.find_element(By.ID, "source").send_keys(paragraph)
    browser.find_element(By.ID, "translate").click()
    log = wait_for(browser, "const l = window.streamLog; return l.length && l[l.length - 1].done && l")
    assert len(log) == 12 + 1 and [e.get("index") for e in log[:-1]] == list(range(12))  # no tokens
    assert log[0] == {"index": 0, "shown": first["text"], "done": False}  # alone, the rest to come
    assert first["text"] != want["translations"][0]["text"]
    assert _page_translation(browser) == want["translations"][0]["text"]


def test_page_shows_one_sentences_translation_token_by_token_with_greedy_decoding(server, browser,
                                                                                 trained_numbers):
    """Beam 1 and one sentence: the page shows the translation growing a token at a time (each
    text the one before it and more), then the sentence, equal to ``/v1/translate``'s."""
    import httpx
    from selenium.webdriver.common.by import By

    if os.environ.get("SERVE_MODEL"):
        pytest.skip("its sentences are the number-words model's")
    model = trained_numbers.partition("=")[0]
    sentence = "six hundred and forty two"
    want = httpx.post(server + "/v1/translate", json={"model": model, "texts": [sentence], "beam": 1},
                      timeout=60).json()["translations"][0]["text"]
    browser.get(server + "/")
    wait_for(browser, "return document.querySelectorAll('#translate-model option').length > 0")
    browser.execute_script("document.getElementById('beam').value = '1';")
    browser.find_element(By.ID, "source").send_keys(sentence)
    browser.find_element(By.ID, "translate").click()
    log = wait_for(browser, "const l = window.streamLog; return l.length && l[l.length - 1].done && l")
    steps = [e for e in log if "step" in e]
    assert len(steps) >= 2 and [e["step"] for e in steps] == list(range(1, len(steps) + 1))
    assert log[: len(steps)] == steps  # every token before the sentence
    assert all(len(a["shown"]) <= len(b["shown"]) for a, b in zip(steps, steps[1:], strict=False))
    assert steps[-1]["shown"] == want == _page_translation(browser)
