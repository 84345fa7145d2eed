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

# MergeKit 0.1.x's wheel, read (not installed) by the census export tests; they skip, saying why, without it
MERGEKIT_DIR ?= $(HOME)/.cache/paramsym/mergekit
mergekit-wheel: install
	@ls $(MERGEKIT_DIR)/mergekit-0.1.*.whl >/dev/null 2>&1 || $(BIN)/pip download --quiet --no-deps mergekit==0.1.5 \
		-d $(MERGEKIT_DIR) || echo "mergekit wheel not downloaded: the MergeKit export tests will skip"

test: install mergekit-wheel
	$(BIN)/python -m pytest

test-slow: install
	$(BIN)/python -m pytest -m slow

# ruff, then the import contracts of pyproject.toml ([tool.importlinter]: layers, independence)
lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/lint-imports

.PHONY: install run test test-slow lint mergekit-wheel
