# Set-up and the two everyday jobs. Everything the project needs is installed from here.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
DEMO_TRACE ?= examples/traces/mlp_cpu.json.gz

.PHONY: setup browser demo test test-lean bench bench-big clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first and pinned: its CPU build is on disk; an open range would pull a CUDA build.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[test,profile,iree,deploy,scale]'
	touch $@

setup: $(VENV)/.installed

# The dashboard's browser tests drive Debian's headless Chromium through chromedriver.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; }

demo: setup
	$(BIN)/perf analyze $(DEMO_TRACE)

# Timing-sensitive roofline checks (marked serial) run alone, after the parallel suite.
test: setup browser
	$(BIN)/python -m pytest -q -n 2 -m "not serial"
	$(BIN)/python -m pytest -q -m serial

# The lean install: `pip install .` (no torch) in a fresh venv runs perf analyze (a few minutes).
test-lean:
	PYTHON=$(PYTHON) bash .ci/lean_install.sh

# The peer (HolisticTraceAnalysis) lives in its own venv, benchmarks/.venv-hta.
bench: setup
	bash benchmarks/setup_hta_env.sh
	$(BIN)/python benchmarks/bench_ingest.py

bench-big: setup
	bash benchmarks/setup_hta_env.sh
	$(BIN)/python benchmarks/bench_ingest.py --big

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
