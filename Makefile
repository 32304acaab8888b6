# tardy: every target bootstraps itself through `setup` (idempotent).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export TARDY_HOME ?= $(CURDIR)/.tardy

.PHONY: setup demo test test-long unit-test sqlmesh-test chromium lint bench chaos clean \
	cluster-up cluster-down cluster-status cluster-story

setup: $(VENV)/.tardy-setup

# One line per step with its time; each step's own output in .venv/setup-logs/, shown
# (its tail) only when the step fails (scripts/setup.py, standard library only).
$(VENV)/.tardy-setup: pyproject.toml constraints.txt src/tardy/runtime/jars.py src/tardy/runtime/jvm.py \
		scripts/setup.py
	@$(PYTHON) scripts/setup.py --venv $(VENV)
	@touch $@

demo: setup
	$(BIN)/tardy demo

# The fast tier (`make test`): what gates every landing (CI). It starts no JVM but the two
# pytest workers' own and one warm engine (tests/integration/test_cli_smoke.py). The long tier
# (`make test-long`): the tests marked `long`, whose subject is a process (the demo, every
# kill -9, the races, the cluster, the warm engine's lifecycle, the stock CLI), then a short
# chaos run; it runs before an issue touching the engine, ingest, the gateways, the warm
# engine or the cluster is resolved, with `make chaos` (20 trials) when it touches the warm
# engine, the lifecycle or ingest's commits (docs/testing.md).
PYTEST = $(BIN)/python -m pytest -q --durations=15 -n 2 --dist loadscope --no-loadscope-reorder
test: setup sqlmesh-test chromium
	$(PYTEST) -m "not long"

test-long: setup sqlmesh-test chromium
	TARDY_CLUSTER_STORY=full $(PYTEST) -m long
	$(MAKE) chaos CHAOS_TRIALS=2

# YAML unit tests run on DuckDB: no Spark, so no warm engine to start for them.
# Twice: the project's tests may not depend on the README's TARDY_START (a later first day).
sqlmesh-test: setup
	TARDY_ENGINE=off $(BIN)/sqlmesh test
	TARDY_ENGINE=off TARDY_START=2026-02-02 $(BIN)/sqlmesh test

# Headless browser for the report page tests (tests/browser.py): Debian's package, never
# Playwright's own browser download. Skipped when a chromium is already on PATH.
chromium:
	@command -v chromium >/dev/null || { apt-get update && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; }

lint: setup
	$(BIN)/ruff check config.py src python_models models macros tests bench scripts
	$(BIN)/ruff format --check config.py src python_models models macros tests bench scripts
	$(BIN)/mypy src/tardy

# Not part of `make test`: ~5 M transactions over 365 days in their own data home.
bench: setup
	TARDY_HOME=$(TARDY_HOME)/bench $(BIN)/python bench/restate_bench.py

# Not part of `make test`: kill tardy commands at seeded random moments, recover, check
# (bench/chaos.py). `make test-long` runs a short version: `make chaos CHAOS_TRIALS=2`.
CHAOS_TRIALS ?= 20
CHAOS_SEED ?= 7
chaos: setup
	rm -rf $(TARDY_HOME)/chaos
	TARDY_HOME=$(TARDY_HOME)/chaos $(BIN)/python bench/chaos.py --trials $(CHAOS_TRIALS) --seed $(CHAOS_SEED)

# A local cluster on loopback under $(TARDY_HOME)/cluster/ (docs/cluster.md): PostgreSQL, a
# Spark standalone master and two workers, a Spark Connect server. `cluster-up` prints the
# `export` lines a shell needs (progress on stderr): eval "$$(make -s cluster-up)".
# The cluster story's long form alone (`make test-long` runs it): every command of the
# `cluster` gateway a process of its own through the rollback.
cluster-story: setup
	TARDY_CLUSTER_STORY=full $(BIN)/python -m pytest -q -s --durations=15 \
		tests/integration/test_on_cluster.py

cluster-up: setup
	@$(BIN)/python -m tardy.cluster up

cluster-down: setup
	@$(BIN)/python -m tardy.cluster down

cluster-status: setup
	@$(BIN)/python -m tardy.cluster status

clean:
	rm -rf $(TARDY_HOME)
