# make run / make test: both create (or refresh) .venv when pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-fast lint bench package screenshots clean

$(STAMP): pyproject.toml setup.py inspector/core/stats/_cstats.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	# torch and torchvision first, at the versions the tests run on; any build where those are missing
	$(PY) -m pip install "torch==2.14.1" "torchvision==0.29.1" || $(PY) -m pip install torch torchvision
	$(PY) -m pip install -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/network-inspector-gui

lint: $(STAMP)
	$(VENV)/bin/ruff check inspector tests
	$(VENV)/bin/lint-imports

# The field's reference implementations that the tests compare with (pytorch-grad-cam,
# torch-cam, Captum, ckatorch, scikit-learn, scipy): test-only, never the app's dependencies.
# --no-deps for the first four: resolving grad-cam's own requirements made pip backtrack to
# an sdist that fails; what they import is installed on the second line.
REFS_STAMP := $(VENV)/.refs-installed
$(REFS_STAMP): $(STAMP) Makefile
	$(PY) -m pip install --no-deps "grad-cam==1.5.7" "torchcam==0.5.0" "captum==0.9.0" "ckatorch==1.0.3" "ttach==0.0.3"
	$(PY) -m pip install scikit-learn scipy scikit-image opencv-python-headless matplotlib seaborn
	touch $(REFS_STAMP)

# One process for the whole suite (see tests/ui/README.md for the hang that once split it).
test: lint $(REFS_STAMP)
	$(PY) -m pytest tests/core tests/ui tests/e2e

# While working: the same suite less the tests marked slow (kills and resumes, Ray, the
# long end-to-end walks). `make test` and CI still run everything.
test-fast: lint $(REFS_STAMP)
	$(PY) -m pytest -m "not slow" tests/core tests/ui tests/e2e

bench: $(REFS_STAMP)
	$(PY) -m tests.benchmarks.run_all

package: $(STAMP)
	bash packaging/build.sh

# The README's pictures of the window (offscreen); tests/e2e/test_screenshots.py checks them.
screenshots: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) docs/screenshots.py

clean:
	rm -rf $(VENV) build dist *.egg-info
