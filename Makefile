# The two commands of the quick start: `make demo` runs the main job on the embedded default,
# `make test` installs what is missing and runs the whole suite (lint, types, layering, tests).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint install clean

# The engine and the simulated cloud (simcloud/, a distribution of its own that the demo, the
# tests and the benchmarks need), both editable, in one pip command: the `simcloud` extra
# then resolves to the local folder, not the package index.
$(STAMP): pyproject.toml simcloud/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ./simcloud -e '.[dev,simcloud]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/convergence demo

lint: $(STAMP)
	$(BIN)/ruff check convergence workers tests benchmarks simcloud
	$(BIN)/mypy
	$(BIN)/lint-imports

# The tests that start no processes of their own in two processes (pytest-xdist), then the
# fault and integration tiers, also two at a time (tests/conftest.py). `pytest` alone runs
# everything in one.
test: lint
	$(BIN)/python -m pytest -n 2 -m "not processes"
	$(BIN)/python -m pytest -n 2 -m processes tests/faults tests/integration

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
