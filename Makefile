# laneway's developer commands. On a fresh machine `make demo` and `make test` set everything up:
# a virtualenv in .venv with laneway installed in editable mode plus its dev extras, and (for the
# tests) a single-node Kafka broker on 127.0.0.1 whose jars scripts/kafka fetches once with Maven.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
LINT_PATHS := $(wildcard laneway tests examples)

.PHONY: venv demo test lint kafka-start kafka-stop clean

venv: $(INSTALLED)

# Re-installs whenever pyproject.toml changes.
$(INSTALLED): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

demo: $(INSTALLED)
	$(BIN)/laneway demo

# Lint and type-check first (no broker needed), then run every test against a real broker:
# LANEWAY_KAFKA_BOOTSTRAP if set, else a broker scripts/with-kafka starts and stops again.
test: lint
	scripts/with-kafka $(BIN)/pytest -q

lint: $(INSTALLED)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy

kafka-start:
	@scripts/kafka start

kafka-stop:
	@scripts/kafka stop

clean:
	scripts/kafka stop
	rm -rf $(VENV) .kafka .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist *.egg-info
