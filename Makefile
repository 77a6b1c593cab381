# tablectl: the two commands a new machine needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: help venv test lint typecheck unit demo bench clean system-tools

help:
	@echo "make demo   - run tablectl on its embedded default (simulated table)"
	@echo "make test   - install everything needed, then ruff, mypy and the whole test suite"
	@echo "make bench  - benchmarks (tests/bench), figures in .bench/"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

venv: $(STAMP)

# System tools some tests use (promtool, systemd-analyze, udevadm, umockdev);
# installed with apt-get when missing so a fresh machine needs nothing by hand.
system-tools:
	@sh tests/tools/install-system-tools.sh

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

unit: venv
	$(BIN)/python -m pytest

test: venv system-tools lint typecheck unit

demo: venv
	$(BIN)/tablectl demo

bench: venv
	$(BIN)/python -m pytest tests/bench -q -s -p no:cacheprovider
	$(BIN)/python tests/bench/bench_pty_latency.py
	$(BIN)/python tests/bench/bench_inprocess_events.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .bench
