# Set-up and entry points. Everything installs into .venv from PyPI; nothing
# else needs to be on the machine but python3.11 and Java 17 (for Spark).

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install servers spin model demo test lint typecheck unit unit-newest bench soak sim mutants spark-package clean test-rgw

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

install: $(STAMP)

# Prometheus, promtool and the Pushgateway from Debian, for the tests that
# run against real servers (installed only when missing).
servers:
	bash scripts/install_servers.sh

# SPIN from Debian, for the protocol models tests/model/ checks (installed
# only when missing; root or sudo). The models compile with gcc.
spin:
	bash scripts/install_spin.sh

# The SPIN models at a larger scope than make test's (docs/internals.md,
# "The protocol, model-checked"): about ten minutes on two cores and up
# to 2 GB of memory per run. Three nodes, two topics and epochs up to 6
# are a bitstate (partial) search under an eight-minute budget; its line
# says so, with its hash factor.
model: $(STAMP) spin
	$(BIN)/python model/check.py large --jobs 2

DEMO_SECONDS ?= 30

demo: $(STAMP)
	$(BIN)/epochgc demo --duration $(DEMO_SECONDS) --config config/local.toml

lint: $(STAMP)
	$(BIN)/ruff check epochgc tests bench model
	$(BIN)/ruff format --check epochgc tests bench model

typecheck: $(STAMP)
	$(BIN)/mypy --strict epochgc
	cd model && ../$(BIN)/mypy --strict check.py render_trail.py

# Two workers: most tests wait on servers and subprocesses, so two halve
# the wall time on two cores. Tests that measure time, memory or a race
# (marked serial) run afterwards, alone, as on an idle machine; the Spark
# and SPIN tests stay on one worker (tests/conftest.py).
# The package is compiled first: these machines set PYTHONDONTWRITEBYTECODE,
# so every process the tests start (CLI commands, nodes, verify workers)
# would otherwise compile every epochgc module again, about 0.3 s each
# (compileall only redoes what changed). The slowest tests are listed
# after each part, to keep the suite inside its time budget.
unit: $(STAMP) servers spin
	$(BIN)/python -m compileall -q epochgc
	$(BIN)/pytest -q -n 2 --dist loadgroup -m "not serial" --durations=30 tests
	$(BIN)/pytest -q -m serial --durations=10 tests

# The unit tests again on the newest Python the dependencies support, in a
# venv of its own (requires-python has no upper bound: say so by testing).
NEWEST_PYTHON_VERSION ?= 3.13
VENV_NEWEST := .venv-$(NEWEST_PYTHON_VERSION)

$(VENV_NEWEST)/.installed: pyproject.toml
	test -x $(VENV_NEWEST)/bin/python || $$(bash scripts/find_python.sh $(NEWEST_PYTHON_VERSION)) -m venv $(VENV_NEWEST)
	$(VENV_NEWEST)/bin/pip install --quiet --upgrade pip
	$(VENV_NEWEST)/bin/pip install --quiet -e '.[all,dev]'
	touch $@

unit-newest: $(VENV_NEWEST)/.installed
	$(VENV_NEWEST)/bin/python -m compileall -q epochgc
	$(VENV_NEWEST)/bin/pytest -q -n 2 tests/unit

test: lint typecheck unit unit-newest

# Ceph's RADOS Gateway from Debian on this machine (scripts/ceph_rgw.sh: one
# monitor, one memstore OSD, radosgw on 127.0.0.1; the packages install when
# missing, as root or with sudo), then tests/rgw/ (check-store and the
# quickstart's produce / reconcile / collect there, and again with each
# process under its own user and docs/policies/ as the bucket policy) and DeleteObjects
# measured there beside moto. Not part of `make test`; stops the gateway.
RGW_DIR ?= /tmp/epochgc-ceph-rgw
RGW_BENCH_KEYS ?= 10000

test-rgw: $(STAMP)
	bash scripts/ceph_rgw.sh start $(RGW_DIR) > $(RGW_DIR).env || { bash scripts/ceph_rgw.sh stop $(RGW_DIR); exit 1; }
	env $$(cat $(RGW_DIR).env) $(BIN)/pytest -v -rP tests/rgw \
	  && env $$(cat $(RGW_DIR).env) $(BIN)/python -m bench.bench_store_delete --keys $(RGW_BENCH_KEYS); \
	  rc=$$?; bash scripts/ceph_rgw.sh stop $(RGW_DIR); rm -f $(RGW_DIR).env; exit $$rc

# Every benchmark runs, one after the other, even when an earlier one
# misses its target; one table at the end; non-zero if any missed.
bench: $(STAMP)
	$(BIN)/python -m bench.run_all

# The long proof under faults: 20 seeds of 60 s each, with a Spark GC job
# mid-way in every run (about 35 minutes). SOAK_SEEDS / SOAK_SECONDS change it.
SOAK_SEEDS ?= $(shell seq 1 20)
SOAK_SECONDS ?= 60

soak: $(STAMP)
	$(BIN)/epochgc verify --seed $(SOAK_SEEDS) --duration $(SOAK_SECONDS) --spark --folder soak-runs

# The deterministic simulation (docs/development.md): 2,000 seeds on every
# core by default (make test runs a window of 50); SIM_SEEDS=1-500 for fewer.
SIM_SEEDS ?= 1-2000

sim: $(STAMP)
	$(BIN)/epochgc simulate --seeds $(SIM_SEEDS)

# Each one-line mutant of a lease or ownership guard must make the
# simulation fail within 200 seeds (about 25 minutes on 2 cores; not in make test).
mutants: $(STAMP)
	$(BIN)/python -m tests.mutation.mutants

# What Spark executors need (docs/spark.md): dist/spark/epochgc.zip for
# --py-files and dist/spark/epochgc-env.tar.gz (boto3 + pyarrow, venv-pack)
# for --archives. A wheel in --py-files never reaches the executors' path.
spark-package: $(STAMP)
	$(BIN)/epochgc spark package --out dist/spark

clean:
	rm -rf $(VENV) $(VENV_NEWEST) dist .pytest_cache .mypy_cache .ruff_cache
