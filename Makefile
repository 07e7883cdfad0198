# `make demo` installs everything into .venv/ and runs the built-in example; `make test` runs the test suite.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml tilepy/pyproject.toml tilepy_verify/pyproject.toml tilepy_hip/pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	touch $(STAMP)

demo: setup
	$(BIN)/python -m argus_agent demo

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q --doctest-modules tilepy
	$(BIN)/python -m pytest -q -n 2 tests

lint: setup
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info */*.egg-info
