# Two set-up commands (see README): `make run` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

$(BIN)/paramsym: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(BIN)/paramsym

install: $(BIN)/paramsym

run: install
	$(BIN)/paramsym discover

test: install
	$(BIN)/python -m pytest

test-slow: install
	$(BIN)/python -m pytest -m slow

# ruff, then the import contracts of pyproject.toml ([tool.importlinter]: layers, independence)
lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/lint-imports

.PHONY: install run test test-slow lint
