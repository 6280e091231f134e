# The two commands a new user types: `make serve` and `make test`. Each creates and fills
# the virtual environment in .venv on first use (Python 3.11+): `make serve` with the broker
# alone, `make test` with the test stack too (PySpark, the clients), Kafka's own Java tools,
# Spark's Kafka connector, franz-go's kfake and its kgo test suite (built with go) in
# .cache/; `make perf` adds perf/'s client and plots to the broker. Any of them may be
# started at once; scripts/install-venv takes a lock.
PYTHON ?= python3
# STRICT=1 makes a strict run, as CI's (CI=true) is: a part that cannot be provisioned fails
# `make test` at once (scripts/strict.sh), a C module that does not compile fails the install
# (setup.py), and a test skipped for a reason tests/support/allowed_skips.py does not name fails the
# run (tests/support/skip_gate.py). Without it a missing tool is a skip, with the reason.
STRICT ?=
ifneq ($(filter 1 true yes,$(STRICT)),)
export NULLBROKER_STRICT := 1
endif
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=
# The suite runs in WORKERS processes at once (pytest-xdist; how the work is split is
# tests/support/parallel.py's): most of it waits on JVMs, brokers and clients, and the waits overlap.
# WORKERS=0 runs it in one process.
WORKERS ?= 3
PARALLEL := $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist loadgroup)
# The C the package builds (setup.py): a change to any of them reinstalls it.
NATIVE_SOURCES := codec/_native.c codec/_kafka_wire.h nullbroker/handlers/_produce_lane.c \
  nullbroker/handlers/produce_lane.h nullbroker/net/_lane_reader.c

.PHONY: serve test oracle perf bytecode fuzz kafka-tools spark-connector lint clean

serve: $(VENV)/.installed-broker bytecode
	$(BIN)/nullbroker serve $(ARGS)

test: $(VENV)/.installed-test bytecode
	scripts/ensure-test-tools
	scripts/ensure-kafka-tools
	scripts/ensure-spark-connector $(VENV)
	scripts/ensure-kfake
	scripts/ensure-kgo-suite
	$(BIN)/pytest $(PARALLEL) --durations 30 $(ARGS)
	@# The whole suite ran with codec/_native.c; the codec and broker tests run again on the
	@# pure-Python path it equals, and the fuzzer with them (the real-client tests drive the
	@# same code through sockets, and what needs Java -- the comparison with Kafka, Kafka's
	@# tools, perf.compare -- asks the same answers of both paths: once is enough; the tools'
	@# own tests, tests/tools/, do not depend on the path).
	@if [ -z "$(ARGS)" ]; then \
	  echo "again without the C decoders (NULLBROKER_NATIVE=off): the codec and broker tests"; \
	  NULLBROKER_NATIVE=off $(BIN)/pytest $(PARALLEL) -m "not clients and not differential and not java" \
	    tests/codec tests/handlers tests/state tests/net tests/sources tests/ops tests/app \
	    tests/workers tests/processes tests/tools/test_fuzz.py; \
	fi

# Kafka as the oracle alone: Apache Kafka 4.4.0 and nullbroker asked the same requests, the
# answers compared field by field (tests/support/differential.py; docs/compatibility.md).
oracle: $(VENV)/.installed-test bytecode
	scripts/ensure-test-tools
	scripts/ensure-kafka-tools
	$(BIN)/pytest $(PARALLEL) -m differential tests $(ARGS)

# perf/'s tools need their client and plots (confluent-kafka, matplotlib) beside the broker,
# not the whole test stack.
perf: $(VENV)/.installed-perf bytecode
	@echo "perf tools ready: $(BIN)/python -m perf.producer_perf --help (perf/README.md)"

# The package's bytecode, written ahead: a broker started where Python may not write it
# (PYTHONDONTWRITEBYTECODE is set, or the checkout is read-only) would compile every module
# at start, which raises its peak RSS by 2 MiB (34.6 MiB against 32.4 on this machine) and
# its start by a third of a second. compileall rewrites only what changed.
bytecode: $(VENV)/.installed-broker
	@$(BIN)/python -m compileall -q codec nullbroker

# Apache Kafka's own tools (kafka-topics, kafka-producer-perf-test, ...), to run against
# `make serve` as against any Kafka.
kafka-tools:
	@scripts/ensure-test-tools
	@bin="$$(scripts/ensure-kafka-tools --print-bin)"; \
	if [ -z "$$bin" ]; then echo "Kafka's tools could not be provisioned (see above)"; exit 1; fi; \
	echo "Apache Kafka's tools are in $$bin:"; ls "$$bin" | grep -v run-class | sed 's/^/  /'; \
	echo "for example: $$bin/kafka-topics --bootstrap-server 127.0.0.1:9092 --list"

# Spark's own Kafka connector (format("kafka")) for the PySpark in .venv, as jars for
# spark.jars or spark-submit --jars.
spark-connector: $(VENV)/.installed-test
	@scripts/ensure-test-tools
	@jars="$$(scripts/ensure-spark-connector $(VENV) --print-jars)"; \
	if [ -z "$$jars" ]; then echo "Spark's Kafka connector could not be provisioned (see above)"; exit 1; fi; \
	echo "Spark's Kafka connector, for spark.jars (or spark-submit --jars):"; echo "$$jars"

# The fuzz target (tests/support/fuzz_requests.py, atheris) for longer than the suite's 20 s; an input
# that breaks the broker lands in out/ (copy it to tests/vectors/fuzz/ to keep it as a test).
FUZZ_SECONDS ?= 600
fuzz: $(VENV)/.installed-test bytecode
	@mkdir -p out
	$(BIN)/python -m tests.support.fuzz_requests -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=out/fuzz-

lint: $(VENV)/.installed-test
	$(BIN)/ruff check codec nullbroker tests spark_tests perf
	$(BIN)/ruff format --check codec nullbroker tests spark_tests perf
	$(BIN)/mypy codec

$(VENV)/.installed-broker: pyproject.toml setup.py $(NATIVE_SOURCES)
	PYTHON=$(PYTHON) scripts/install-venv $(VENV) broker

$(VENV)/.installed-perf: pyproject.toml setup.py $(NATIVE_SOURCES)
	PYTHON=$(PYTHON) scripts/install-venv $(VENV) perf

$(VENV)/.installed-test: pyproject.toml setup.py $(NATIVE_SOURCES)
	PYTHON=$(PYTHON) scripts/install-venv $(VENV) test

clean:
	rm -rf $(VENV) $(VENV).lock .pytest_cache .hypothesis .mypy_cache .ruff_cache *.egg-info
