# Set-up and entry points. Everything installs into .venv from PyPI; nothing
# else needs to be on the machine but Python 3.11 to 3.13 and Java 17 (for
# Spark). PYTHON: python3 when it is one of those, else the first of
# python3.11, 3.12, 3.13 found (make PYTHON=/path/to/python to choose).

PYTHON ?= $(shell bash scripts/find_python.sh supported)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
NEW_VENV = test -x $(BIN)/python || { test -n "$(PYTHON)" || exit 1; $(PYTHON) -m venv $(VENV); }

.PHONY: install servers spin model demo test lint typecheck unit unit-newest bench soak sim mutants spark-package clean test-rgw images test-image

$(STAMP): pyproject.toml
	$(NEW_VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

# The demo needs the base install and the embedded S3 only (not pyspark,
# mypy or ruff): about 490 MB instead of 1.1 GB. A venv make test filled
# serves it as it is.
$(DEMO_STAMP): pyproject.toml
	$(NEW_VENV)
	test -f $(STAMP) || { $(BIN)/pip install --quiet --upgrade pip && $(BIN)/pip install --quiet -e '.[embedded]'; }
	touch $(DEMO_STAMP)

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

demo: $(DEMO_STAMP)
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

# The container images of deploy/containers/ (docs/operating.md, "Container
# images"), built here without a registry: scripts/build_images.sh makes a
# Debian bookworm base with mmdebstrap (kept in IMAGE_CACHE, made again once
# a week), builds the wheels on this machine and runs podman build for
# localhost/epochgc:VERSION and localhost/epochgc-spark:VERSION (podman,
# mmdebstrap and runc install from Debian when missing; root or sudo).
IMAGE_CACHE ?= /var/tmp/epochgc-images
IMAGE_ENV := dist/images.env
BUILD_IMAGES = PYTHON=$(BIN)/python IMAGE_CACHE=$(IMAGE_CACHE) bash scripts/build_images.sh

images: $(STAMP)
	$(BUILD_IMAGES)

# The images built, then run by tests/image/: --version, demo, the embedded
# S3, a reconciler and the daemon in three containers on one network until M
# advances and the L0 objects are deleted, and gc spark from the Spark
# image. Not part of `make test` (minutes, root, podman).
test-image: $(STAMP)
	mkdir -p dist
	$(BUILD_IMAGES) > $(IMAGE_ENV)
	env $$(cat $(IMAGE_ENV)) $(BIN)/pytest -v -rP tests/image; \
	  rc=$$?; rm -f $(IMAGE_ENV); exit $$rc

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
