# Set-up and entry points. Everything installs into .venv from PyPI; nothing
# else needs to be on the machine but python3.11 and Java 17 (for Spark).

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install servers demo test lint typecheck unit bench wheel clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Prometheus, promtool and the Pushgateway from Debian, for the tests that
# run against real servers (installed only when missing).
servers:
	bash scripts/install_servers.sh

DEMO_SECONDS ?= 30

demo: $(STAMP)
	$(BIN)/epochgc demo --duration $(DEMO_SECONDS) --config config/local.toml

lint: $(STAMP)
	$(BIN)/ruff check epochgc tests bench
	$(BIN)/ruff format --check epochgc tests bench

typecheck: $(STAMP)
	$(BIN)/mypy --strict epochgc

unit: $(STAMP) servers
	$(BIN)/pytest -q tests

test: lint typecheck unit

# Every benchmark runs even when an earlier one misses its target; the
# target exits non-zero if any did.
BENCHES := bench_delete bench_fence bench_pipeline bench_sweep bench_inventory

bench: $(STAMP)
	@status=0; for b in $(BENCHES); do $(BIN)/python -m bench.$$b || status=1; done; exit $$status

# The package as a wheel, for spark-submit --py-files (see README).
wheel: $(STAMP)
	$(BIN)/pip wheel --quiet --no-deps --wheel-dir dist .

clean:
	rm -rf $(VENV) dist .pytest_cache .mypy_cache .ruff_cache
