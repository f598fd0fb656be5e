# The two commands of the quick start: `make demo` runs the main job on the embedded default,
# `make test` installs what is missing and runs the whole suite (lint, types, layering, tests).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/convergence demo

lint: $(STAMP)
	$(BIN)/ruff check convergence workers tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

# Two processes (pytest-xdist); the tiers that start processes of their own run in one group
# (tests/conftest.py). `pytest` without `-n` runs in one process.
test: lint
	$(BIN)/python -m pytest -n 2 --dist loadgroup

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
