# One set-up path for a fresh machine: `make test` or `make demo` creates .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup browser test test-avx2 test-all lint demo clean screenshot bench docs docs-serve \
	docs-reference

# Which build of PyTorch: by default pip's own index, where torch 2.13.0 is the CUDA build on Linux
# x86-64 (several GB, with NVIDIA's libraries) and the CPU build on macOS and Windows; a machine
# whose pip is set up with a local wheel gets that one. TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# installs the CPU-only build (about 200 MB), .../whl/cu128 a given CUDA build.
TORCH_INDEX_URL ?=
TORCH_FROM := $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL))

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt $(TORCH_FROM) torch==2.13.0
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

# The suite without the slow end-to-end runs and the GPU check (tests/gpu/, marked cuda: on a GPU
# machine, benchmarks/gpu_check.py runs it); `make test-all` includes them. Then the tests whose
# kernels depend on the CPU's instruction set once more with PyTorch, oneDNN, MKL and CTranslate2
# held to AVX2 (no AVX-512, no native bf16, no VNNI), so an AVX-512 machine catches what breaks on
# AVX2 machines (on an AVX2 machine it repeats them).
FORCE_AVX2 := ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 CT2_FORCE_CPU_ISA=AVX2
ISA_TESTS := tests/test_hardware.py tests/test_precision.py tests/cli/test_precision_cli.py \
	tests/model tests/decoding tests/convert/test_ctranslate2.py tests/memory tests/training/test_trainer.py \
	tests/training/test_preemption.py tests/cli/test_reliability.py tests/inference/test_engines.py

test: $(STAMP) browser
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest -m "not slow and not cuda" -q
	$(MAKE) --no-print-directory test-avx2

test-avx2: $(STAMP)
	$(FORCE_AVX2) $(BIN)/python -m pytest -m "not slow and not cuda" -q -p no:cacheprovider $(ISA_TESTS)

test-all: $(STAMP) browser
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

# What benchmarks/ needs beyond the package (transformers, ctranslate2; the test extra has them too).
bench: $(STAMP)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[bench]'

# Mutation testing (mutmut, the mutation extra) of the modules that guard users, each in a copy of
# the tree against the tests that cover it (benchmarks/mutants.py MODULES): kill rate per module and
# every survivor's diff in mutants-report/. CPU heavy (about 6 minutes for serving/guard.py on 2
# cores); MODULES="atomic.py serving/guard.py" runs some.
mutants: $(STAMP)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[mutation]'
	$(BIN)/python benchmarks/mutants.py --out mutants-report $(MODULES)

# The page's screenshot in the README: the browser test, writing docs/serve-page.png.
screenshot: $(STAMP) browser
	SERVE_SCREENSHOT=docs/serve-page.png $(BIN)/python -m pytest tests/serving/test_browser.py -q

demo: $(STAMP)
	$(BIN)/transformer demo

# The documentation site (docs/, mkdocs.yml) into site/: MkDocs with the Material theme, built
# offline (no web fonts, no CDN) and --strict (a warning, a broken link or anchor fails it).
DOCS_STAMP := $(VENV)/.docs-installed

$(DOCS_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# The command-line and Python API reference pages, generated from the parsers and the docstrings
# and committed (GitHub shows them as the site does); tests/docs/test_reference.py fails when stale.
docs-reference: $(STAMP)
	$(BIN)/python docs/_generate/reference.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache
