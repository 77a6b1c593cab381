# tablectl: the two commands a new machine needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test-random help venv test test-long lint typecheck unit demo bench clean system-tools replay-regen matrix-regen diagrams \
	soak fuzz dist deb demo-floor watch-screenshot manuals

help:
	@echo "make demo   - run tablectl on its embedded default (simulated table)"
	@echo "make dist   - sdist and wheel into dist/ (python -m build), checked by twine --strict"
	@echo "make deb    - the Debian package of that release into dist/ (Debian 12), checked by lintian"
	@echo "make test   - install everything needed, then ruff, mypy and the test suite"
	@echo "make test-long - the suites of a minute or more (release venv, conformance kit)"
	@echo "make demo-floor - three tables shipping to a throwaway PostgreSQL; the floor's report"
	@echo "make bench  - benchmarks (tests/bench), figures in .bench/"
	@echo "make soak   - 1,000,000 rounds with faults and invariants, the whole fault matrix"
	@echo "make fuzz   - long coverage-guided fuzzing (atheris) of codec, parsers, config"
	@echo "make replay-regen - rewrite the golden replay expectations (review git diff after)"
	@echo "make matrix-regen - rewrite the event x state matrix of each game (review git diff after)"
	@echo "make diagrams     - state charts of each game into docs/state-charts/"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The example vendor driver (examples/vendor-shoe) is installed too: the conformance kit and
# the release tests put it through its paces (docs/drivers.md). So is the example game
# (examples/high-card-game): the tests run it under `tablectl run` (docs/games.md).
$(STAMP): $(BIN)/python pyproject.toml setup.py examples/vendor-shoe/pyproject.toml \
		examples/high-card-game/pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m pip install --quiet --no-deps -e examples/vendor-shoe
	$(BIN)/python -m pip install --quiet --no-deps -e examples/high-card-game
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

# `make test` stays under ten minutes: suites marked `long` (a fresh venv and build, the
# whole conformance kit) run in `make test-long`; .ci/run runs both.
# It runs in a shuffled order (pytest-randomly, which prints the seed): a test that passes only
# after another, or fails after one that leaks, fails here. The default seed is one whose order
# has been seen green under load, so CI is repeatable; RANDOM_SEED=N tries another order,
# `make test-random` a fresh one each time.
RANDOM_SEED ?= 20261129
unit: venv
	$(BIN)/python -m pytest -o addopts="-ra --strict-markers" -m "not long" \
		--randomly-seed=$(RANDOM_SEED) --durations=15

test: venv system-tools lint typecheck unit

# `make test`'s suite in a fresh random order each run (it prints the seed;
# `make unit RANDOM_SEED=N` repeats that order).
test-random: venv system-tools
	$(BIN)/python -m pytest -o addopts="-ra --strict-markers" -m "not long" --durations=15

test-long: venv system-tools
	$(BIN)/python -m pytest -m long --durations=15

# The daemon on a simulated table until Ctrl-C; e.g. make demo DEMO_ARGS="--game asia_poker --faults"
demo: venv
	$(BIN)/tablectl demo $(DEMO_ARGS)

# Shell completion (bash, zsh) and man pages (tablectl, -run, -op, -journal, -floor), generated
# from the parser into controller/share/
# (shipped in the wheel; tests/unit/test_manuals.py fails when they are stale).
manuals: venv
	$(BIN)/python -m tablectl.controller.commands.manuals

# The README's picture of `tablectl watch`: the headless test's screen at its C9 notification.
watch-screenshot: venv
	TABLECTL_WATCH_SCREENSHOT=docs/watch.svg $(BIN)/python -m pytest -q \
		tests/e2e/test_watch.py -k follows -p no:cacheprovider

# Three simulated tables (three games) shipping their journals to a throwaway PostgreSQL
# started in a temp dir as an unprivileged user (docs/floor.md); prints the gaming day's
# report and a `tablectl floor round` command for a voided round.
demo-floor: venv system-tools
	$(BIN)/tablectl demo --floor $(DEMO_ARGS)

# One harness (tests/bench/harness.py): .bench/results.json, details.json, latency.png.
BENCH_ARGS ?=
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) system-tools
	$(BIN)/python -m tests.bench.harness $(BENCH_ARGS)

# Proof at scale (docs/performance.md): SOAK_ARGS="--rounds 20000" for a shorter run.
SOAK_ARGS ?=
# The daemon soak: DAEMON_SOAK_ARGS="--rounds 600 --fault-rate 0.1" for a shorter run.
DAEMON_SOAK_ARGS ?=
soak: venv
	$(BIN)/python -m tests.soak.soak $(SOAK_ARGS)
	$(BIN)/python -m tests.soak.daemon_soak $(DAEMON_SOAK_ARGS)
	TABLECTL_FAULT_MATRIX=all $(BIN)/python -m pytest tests/faults -q -p no:cacheprovider

# Long coverage-guided fuzzing (atheris, the `fuzz` extra); FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 300
FUZZ_STAMP := $(VENV)/.fuzz-installed
$(FUZZ_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,fuzz]'
	@touch $(FUZZ_STAMP)

fuzz: $(FUZZ_STAMP)
	@for t in protocol scenario events config; do \
		echo "== fuzz $$t ($(FUZZ_SECONDS) s)"; \
		$(BIN)/python -m tests.fuzz.atheris_fuzz $$t -max_total_time=$(FUZZ_SECONDS) \
			-timeout=10 -print_final_stats=1 || exit 1; \
	done

# Golden replays: rewrite tests/replay/scenarios/*.expected.jsonl after a deliberate
# change of the engine's rulings; review `git diff tests/replay` before committing.
replay-regen: venv
	$(BIN)/python -m tests.replay.regen

# Every event in every state of every game's chart (tests/engine_matrix/golden/GAME.md).
matrix-regen: venv
	$(BIN)/python -m tests.engine_matrix.matrix

# The state charts in docs/state-charts/, from the machines' own definitions.
# Drawn by transitions' own diagram support (mermaid text; SVG through its graphviz
# engine, which needs the `diagrams` extra and graphviz's dot).
diagrams: venv
	$(BIN)/python -m pip install --quiet -e '.[diagrams]'
	@mkdir -p docs/state-charts
	@for g in three_card_21 five_card_hilo heads_up_holdem asia_poker; do \
		$(BIN)/tablectl diagram --game $$g --svg docs/state-charts/$$g.svg \
			> docs/state-charts/$$g.mmd || exit 1; \
	done

# A release: the sdist, then the wheel built from it (python -m build), both checked.
dist: venv
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

# The Debian package of the release (docs/operations.md, "The Debian package"): the wheel in a
# private environment under /usr/lib/tablectl made with Debian 12's python3.11, the unit, udev
# rules, sysusers/tmpfiles entries, manual, completion and docs; lintian must pass without
# errors or warnings (the overrides in packaging/deb/lintian-overrides say why).
# DEB_REVISION=2 for a rebuild of the same release.
DEB_REVISION ?= 1
deb: dist system-tools
	$(BIN)/python packaging/deb/build.py --wheel dist/tablectl-*.whl --out dist \
		--revision $(DEB_REVISION)
	lintian --fail-on error,warning dist/tablectl_*.deb

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .bench
