# laneway's developer commands. On a fresh machine `make demo` and `make test` set everything up:
# a virtualenv in .venv with laneway installed in editable mode (runtime dependencies only for
# the demo, plus the dev extras for the tests), and (for the tests) a single-node Kafka broker
# on 127.0.0.1 whose jars scripts/kafka fetches once with Maven.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime-installed
DEV := $(VENV)/.dev-installed
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check
# 'compat' puts the checkout on sys.path through a .pth file, so type checkers and other
# static tools run from the venv see laneway too (the default mode hides it behind an
# import hook).
EDITABLE := --config-settings editable_mode=compat -e
LINT_PATHS := $(wildcard laneway tests examples)

.PHONY: venv demo test lint kafka-start kafka-stop clean

venv: $(DEV)

# Each re-installs whenever pyproject.toml changes; the dev install includes the runtime one.
$(RUNTIME): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) $(EDITABLE) .
	touch $@

$(DEV): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) $(EDITABLE) '.[dev]'
	touch $@ $(RUNTIME)

demo: $(RUNTIME)
	$(BIN)/laneway demo

# Lint and type-check first (no services needed), then run every test against a real broker
# and a real PostgreSQL: LANEWAY_KAFKA_BOOTSTRAP / LANEWAY_POSTGRES_DSN if set, else servers
# scripts/with-services starts and stops again.
test: lint
	scripts/with-services kafka postgres -- $(BIN)/pytest -q

lint: $(DEV)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy

kafka-start:
	@scripts/kafka start

kafka-stop:
	@scripts/kafka stop

clean:
	scripts/kafka stop
	scripts/postgres stop
	rm -rf $(VENV) .kafka .postgres .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist *.egg-info
