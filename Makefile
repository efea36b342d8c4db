# make run / make test: both create (or refresh) .venv when pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint bench package screenshots clean

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

# One process for the whole suite (see tests/ui/README.md for the hang that once split it).
test: lint
	$(PY) -m pytest tests/core tests/ui tests/e2e

# pytorch-grad-cam is the CAM benchmark's baseline only, never a dependency of the app.
# --no-deps: resolving grad-cam's own requirements made pip backtrack to an sdist that fails.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --no-deps "grad-cam==1.5.7"
	$(PY) -m pip install ttach opencv-python-headless matplotlib scikit-learn scipy
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) -m tests.benchmarks.run_all

package: $(STAMP)
	bash packaging/build.sh

# The README's pictures of the window (offscreen); tests/e2e/test_screenshots.py checks them.
screenshots: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) docs/screenshots.py

clean:
	rm -rf $(VENV) build dist *.egg-info
