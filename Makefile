# Every target creates or updates the local virtual environment first, so a fresh
# checkout needs nothing but `make gate` or `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: gate test bench venv clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

## The scenario gate on the built-in curriculum.
gate: $(STAMP)
	$(BIN)/pytest scenarios/ -n auto --dist loadgroup $(ARGS)

## The whole test suite: unit, property and scenario tests.
test: $(STAMP)
	$(BIN)/pytest tests/ scenarios/ -n auto --dist loadgroup $(ARGS)

## Speed and scaling benchmarks (not part of `make test`).
bench: $(STAMP)
	$(BIN)/pytest benchmarks/ -p no:xdist --benchmark-only $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .benchmarks
