# eoskafka: two commands for a newcomer, `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: setup kafka-jars test test-tansu test-tansu-all test-kafka test-kafka-faults test-kafka39 test-fast test-faults lint demo \
	demo-docker bench bench-connector contrast chaos chaos-operator smoke-spark smoke-spark40 clean

setup: $(STAMP)

## editable_mode=compat puts the checkout on sys.path: Spark finds the static registration
## (pyspark_eoskafka) with pkgutil.iter_modules(), which does not see setuptools' default
## editable finder, so format("eoskafka") would fail from any other working directory
## (a Spark Connect session's, a cluster worker's).
EDITABLE := -e '.[dev]' --config-settings editable_mode=compat

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(EDITABLE)
	touch $(STAMP)

## Apache Kafka's jars (4.3.x and 3.9.x), fetched from Maven Central with mvn once and cached
## in ~/.cache/eoskafka (never in the repo).
kafka-jars: setup
	$(PY) -c "from eos_kafka_source.apache_kafka import kafka_jars; kafka_jars('4.3'); kafka_jars('3.9')"

## The whole suite, on both brokers. Apache Kafka 4.3 is the reference: every broker and
## Spark test runs on it (its heavy fault cases: `make test-kafka-faults`, a CI step of its own). Tansu (the embedded broker): unit, broker, deployment (wheel,
## Spark Connect, notebook) tests and a representative Spark subset (`smoke` + Tansu-only),
## to keep CI's time; `make test-tansu-all` runs every Spark test on Tansu too. Apache
## Kafka 3.9: the sink protocol and wire tests (classic transaction protocol).
test: setup lint kafka-jars test-tansu test-kafka test-kafka39

test-tansu: setup
	EOSKAFKA_TEST_BROKER=tansu $(PY) -m pytest -q tests/unit tests/broker tests/deploy
	EOSKAFKA_TEST_BROKER=tansu $(PY) -m pytest -q -m "smoke or tansu_only" tests/spark

test-tansu-all: setup
	EOSKAFKA_TEST_BROKER=tansu $(PY) -m pytest -q tests

test-kafka: kafka-jars
	EOSKAFKA_TEST_BROKER=kafka $(PY) -m pytest -q --durations=12 -m "not faults" tests/broker tests/spark

## The heavy fault cases on Apache Kafka (3-node coordinator and leader failover, transaction
## timeouts, driver kills): their own target, run by CI as its own step.
test-kafka-faults: kafka-jars
	EOSKAFKA_TEST_BROKER=kafka $(PY) -m pytest -q --durations=12 -m faults tests/broker tests/spark

KAFKA39_TESTS := tests/broker/test_sink_protocol.py tests/broker/test_wire.py \
	tests/broker/test_batch_write_abort.py tests/broker/test_tansu_quirks.py
test-kafka39: kafka-jars
	EOSKAFKA_TEST_BROKER=kafka39 $(PY) -m pytest -q $(KAFKA39_TESTS)

## Everything except the heavy fault-injection cases (BROKER=kafka: on Apache Kafka 4.3).
BROKER ?= tansu
test-fast: setup
	EOSKAFKA_TEST_BROKER=$(BROKER) $(PY) -m pytest -q -m "not faults" tests

test-faults: setup
	EOSKAFKA_TEST_BROKER=$(BROKER) $(PY) -m pytest -q -m faults tests

lint: setup
	$(VENV)/bin/ruff check --no-cache eos_kafka_source pyspark_eoskafka tests benchmarks

## BROKER=kafka runs the demo on Apache Kafka 4.3 (a local JVM process) instead of Tansu,
## and checks the output with Kafka's own Java read_committed consumer too.
demo: setup
	$(PY) -m eos_kafka_source.demo --broker $(BROKER)

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
## console consumer: bench-results/contrast.md and the contrast table in docs/performance.md.
contrast: setup
	$(PY) -m benchmarks.contrast

## Exactly-once under faults on a Spark standalone cluster + durable broker (tests/chaos).
## `make chaos` is the short round (one fault of each kind + 2, a few minutes);
## `make chaos SOAK=30` injects 30 faults. CHAOS_SEED=N replays a schedule.
## BROKER=kafka: a 3-node Apache Kafka with its own fault kinds (coordinator and leader
## kills, a rolling restart, a driver down past the transaction timeout).
## CHAOS_DEADLINE=S gives up (exit 1) after S seconds (default 600 + 120 per fault).
SOAK ?= short
CHAOS_SEED ?=
CHAOS_DEADLINE ?=
chaos: setup
	SOAK=$(SOAK) $(PY) -m tests.chaos --broker $(BROKER) $(if $(CHAOS_SEED),--seed $(CHAOS_SEED)) \
	  $(if $(CHAOS_DEADLINE),--deadline $(CHAOS_DEADLINE))

## The operator round on a 3-node Apache Kafka (tests/chaos/operator_faults.py): a checkpoint
## reset with the decision log kept, a restart with changed options, `eoskafka fence` on a
## crashed query, a failed batch write rerun with a fixed prefix, ids expiring while the
## driver is down, a start during a broker outage; one of each (SOAK=N for a soak).
chaos-operator: kafka-jars
	SOAK=$(SOAK) $(PY) -m tests.chaos --broker kafka --operator \
	  $(if $(CHAOS_SEED),--seed $(CHAOS_SEED)) $(if $(CHAOS_DEADLINE),--deadline $(CHAOS_DEADLINE))

## Smoke set (pytest -m smoke) on every older supported Spark minor, each in its own venv
## (.venv-spark4.0 ...); the newest (4.3) is the main venv's and runs in `make test`.
## `make smoke-spark SMOKE_SPARK=4.1` runs one. pip's cache makes repeat installs quick.
SMOKE_SPARK ?= 4.0 4.1 4.2
smoke-spark:
	@set -e; for v in $(SMOKE_SPARK); do \
	  venv=.venv-spark$$v; next=$$(echo $$v | awk -F. '{print $$1"."$$2+1}'); \
	  echo "== smoke on pyspark $$v.x ($$venv)"; \
	  test -x $$venv/bin/python || $(PYTHON) -m venv $$venv; \
	  $$venv/bin/python -m pip install -q --upgrade pip; \
	  $$venv/bin/python -m pip install -q "pyspark[connect]>=$$v,<$$next" $(EDITABLE); \
	  $$venv/bin/python -c "import pyspark; print('pyspark', pyspark.__version__)"; \
	  PYSPARK_PYTHON=$(CURDIR)/$$venv/bin/python PYSPARK_DRIVER_PYTHON=$(CURDIR)/$$venv/bin/python \
	    $$venv/bin/python -m pytest -q -m smoke -p no:cacheprovider tests; \
	done

## Kept for scripts that call it: the smoke set on 4.0 only.
smoke-spark40:
	$(MAKE) smoke-spark SMOKE_SPARK=4.0

clean:
	rm -rf $(VENV) .venv-spark* build dist *.egg-info .pytest_cache
