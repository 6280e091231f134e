# The two commands a new user types: `make serve` and `make test`. Each creates and fills
# the virtual environment in .venv on first use (Python 3.11+).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: serve test lint clean

serve: $(VENV)/.installed
	$(BIN)/nullbroker serve $(ARGS)

test: $(VENV)/.installed
	scripts/ensure-test-tools
	$(BIN)/pytest $(ARGS)

lint: $(VENV)/.installed
	$(BIN)/ruff check codec nullbroker tests spark_tests perf
	$(BIN)/ruff format --check codec nullbroker tests spark_tests perf
	$(BIN)/mypy codec

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache *.egg-info
