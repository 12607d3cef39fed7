# One set-up path for a fresh machine: `make test` or `make demo` creates .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup browser test test-all lint demo clean screenshot bench

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt torch==2.13.0
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

# The browser test drives Debian's Chromium through its matching chromedriver; install both when
# they are missing and apt-get can (CI runs as root). Elsewhere the browser test skips (not in CI).
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "chromium/chromedriver missing and apt-get unavailable: the browser test will skip"; fi; \
	fi

# The suite without the slow end-to-end runs; `make test-all` includes them.
test: $(STAMP) browser
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest -m "not slow" -q

test-all: $(STAMP) browser
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

# What benchmarks/ needs beyond the package (transformers, ctranslate2; the test extra has them too).
bench: $(STAMP)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[bench]'

# The page's screenshot in the README: the browser test, writing docs/serve-page.png.
screenshot: $(STAMP) browser
	SERVE_SCREENSHOT=docs/serve-page.png $(BIN)/python -m pytest tests/serving/test_browser.py -q

demo: $(STAMP)
	$(BIN)/transformer demo

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache
