# eoskafka: two commands for a newcomer, `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: setup test test-fast test-faults lint demo demo-docker bench bench-connector contrast chaos smoke-spark40 clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

## The whole suite: unit, broker, Spark and fault-injection tests.
test: setup lint
	$(PY) -m pytest -q tests

## Everything except the heavy fault-injection cases.
test-fast: setup
	$(PY) -m pytest -q -m "not faults" tests

test-faults: setup
	$(PY) -m pytest -q -m faults tests

lint: setup
	$(VENV)/bin/ruff check eos_kafka_source pyspark_eoskafka tests benchmarks

demo: setup
	$(PY) -m eos_kafka_source.demo

## The same demo against real Apache Kafka in Docker (needs a running Docker engine).
demo-docker:
	docker/demo-docker.sh

## Per-task and Spark figures on the embedded broker, then the side-by-side with Spark's
## own Kafka connector on Apache Kafka (bench-results/latest.md, bench-results/versus.md).
bench: setup
	$(PY) -m benchmarks.run
	$(PY) -m benchmarks.versus

## Only the comparison with Spark's Kafka connector (Apache Kafka started by the benchmark).
bench-connector: setup
	$(PY) -m benchmarks.versus

## At-least-once vs exactly-once under the same faults, duplicates counted with Kafka's
## console consumer: bench-results/contrast.md and the README's contrast table.
contrast: setup
	$(PY) -m benchmarks.contrast

## Exactly-once under faults on a Spark standalone cluster + durable broker (tests/chaos).
## `make chaos` is the short round (one fault of each kind + 2, a few minutes);
## `make chaos SOAK=30` injects 30 faults. CHAOS_SEED=N replays a schedule.
SOAK ?= short
CHAOS_SEED ?=
chaos: setup
	SOAK=$(SOAK) $(PY) -m tests.chaos $(if $(CHAOS_SEED),--seed $(CHAOS_SEED))

## Smoke run on the oldest supported Spark (4.0) in its own venv.
SPARK40 := .venv-spark40
smoke-spark40:
	test -x $(SPARK40)/bin/python || $(PYTHON) -m venv $(SPARK40)
	$(SPARK40)/bin/python -m pip install -q --upgrade pip
	$(SPARK40)/bin/python -m pip install -q 'pyspark>=4.0,<4.1' -e '.[dev]'
	PYSPARK_PYTHON=$(abspath $(SPARK40))/bin/python PYSPARK_DRIVER_PYTHON=$(abspath $(SPARK40))/bin/python \
	  $(SPARK40)/bin/python -m pytest -q -m smoke tests

clean:
	rm -rf $(VENV) $(SPARK40) build *.egg-info .pytest_cache
