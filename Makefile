# tardy: every target bootstraps itself through `setup` (idempotent).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export TARDY_HOME ?= $(CURDIR)/.tardy

.PHONY: setup demo test unit-test sqlmesh-test lint bench clean

setup: $(VENV)/.tardy-setup

$(VENV)/.tardy-setup: pyproject.toml constraints.txt src/tardy/jars.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	$(BIN)/python -m tardy.jars install
	@touch $@

demo: setup
	$(BIN)/tardy demo

test: setup sqlmesh-test
	$(BIN)/python -m pytest -q --durations=10

sqlmesh-test: setup
	$(BIN)/sqlmesh test

lint: setup
	$(BIN)/ruff check src python_models models macros tests bench
	$(BIN)/ruff format --check src python_models models macros tests bench

# Not part of `make test`: ~5 M transactions over 365 days in their own data home.
bench: setup
	TARDY_HOME=$(TARDY_HOME)/bench $(BIN)/python bench/restate_bench.py

clean:
	rm -rf $(TARDY_HOME)
