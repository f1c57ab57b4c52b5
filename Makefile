# eoskafka: two commands for a newcomer, `make demo` and `make test`.
# bash: `make test` runs its lanes with pipefail.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: setup kafka-jars registry-app test test-tansu test-tansu-all test-kafka test-kafka-faults \
	test-kafka-faults-broker test-kafka-faults-spark test-kafka39 test-fast test-faults lint demo \
	demo-docker availability bench bench-setup bench-latency bench-scale bench-longrun bench-connector bench-formats contrast chaos \
	chaos-operator failover sweep explore explore-ci explore-formats smoke-spark smoke-spark-deps \
	smoke-spark40 kerberos-deps release clean

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

## Apache Kafka's jars (4.4.x, 4.3.x and 3.9.x), fetched from Maven Central with mvn once and cached
## in ~/.cache/eoskafka (never in the repo).
kafka-jars: setup
	$(PY) -c "from eos_kafka_source.apache_kafka import kafka_jars; kafka_jars('4.4'); kafka_jars('4.3'); kafka_jars('3.9')"

## Apicurio Registry 3.3.3, the schema registry of the format tests (tests/formats): fetched
## from Maven Central with mvn once and extracted into ~/.cache/eoskafka (never the repo). It
## runs on Java 21+ (a JDK under /usr/lib/jvm or JAVA_HOME): this fails naming what to install.
registry-app: setup
	$(PY) -m tests.schema_registry fetch

## Kerberos (GSSAPI) sign-in and its tests (tests/broker/test_kerberos.py): MIT Kerberos'
## KDC binaries (krb5kdc, kdb5_util, kadmin.local) and headers, then the `gssapi` package
## (eoskafka's [kerberos] extra), which has no Linux wheel and builds against those headers
## (~2 min the first time; pip caches the wheel). As root the Debian packages are installed
## with apt-get (its lists updated only if the install fails without them); otherwise it
## says what to install. Done once: the stamp is kept in the venv.
KRB_PACKAGES := libkrb5-dev krb5-kdc krb5-admin-server
KRB_STAMP := $(VENV)/.installed-kerberos
kerberos-deps: $(KRB_STAMP)

$(KRB_STAMP): $(STAMP)
	@start=$$(date +%s); have() { PATH="$$PATH:/usr/sbin:/usr/local/sbin" command -v "$$1" >/dev/null; }; \
	if ! have krb5kdc || ! have kdb5_util || ! have kadmin.local || ! have krb5-config; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "kerberos-deps: MIT Kerberos' KDC and headers are missing. Install them as root" \
	      "(Debian/Ubuntu: apt-get install $(KRB_PACKAGES); Fedora/RHEL: dnf install" \
	      "krb5-server krb5-workstation krb5-devel), then run make again." >&2; exit 1; \
	  fi; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q --no-install-recommends $(KRB_PACKAGES) >/dev/null 2>&1 \
	    || { apt-get update -q >/dev/null && \
	         apt-get install -y -q --no-install-recommends $(KRB_PACKAGES) >/dev/null; } || exit 1; \
	fi; \
	$(PY) -m pip install -q -e '.[dev,kerberos]' --config-settings editable_mode=compat || exit 1; \
	$(PY) -c "import gssapi" || exit 1; \
	echo "kerberos-deps: MIT Kerberos and gssapi ready in $$(( $$(date +%s) - start )) s"
	touch $(KRB_STAMP)

## The whole suite, on both brokers. Apache Kafka 4.4 is the reference: every broker and
## Spark test runs on it (its heavy fault cases: `make test-kafka-faults`, a CI step of its
## own). Tansu (the embedded broker, the demo's) runs only what Kafka cannot, so CI does not
## pay twice: the unit tests (once, broker-free), the deployment tests (wheel, Spark Connect,
## notebook: cheap on Tansu), Tansu's own cases (`tansu_only`, its quirks) and a
## representative smoke set (the sink protocol, the Spark `smoke` cases). `make
## test-tansu-all` (or `make test-fast`) runs everything on Tansu: the quick inner loop.
## Apache Kafka 4.3 (the previous release) and 3.9 (classic transaction protocol): the sink
## protocol and wire tests. The sets run in two lanes (`make test TEST_LANES=1`: one after
## another): the Kafka 4.4 set in one, the Tansu, 4.3 and 3.9 sets in the other. Most of
## their time is spent waiting on brokers, Spark's scheduler and transaction timeouts, not
## computing; each set has its own brokers and Spark session on free ports and unique topic
## names, so they cannot meet. Each output line starts with its lane; every set runs even
## when another failed; each set's time and status is printed as it ends, and the last line
## gives each lane's exit status. LANE1 and LANE2 are the lanes' targets, in order: CI
## sets both, adding its heavy targets so that each lane is about as long as the other
## (.ci/run).
TEST_LANES ?= 2
LANE1 ?= test-kafka
LANE2 ?= test-tansu test-kafka43 test-kafka39
## lane TARGET...: each target in turn, its time and status; fails if any failed.
RUN_LANE = s=0; for t in $(1); do start=$$SECONDS; r=0; $(MAKE) --no-print-directory $$t || r=$$?; \
	  echo "make test: $$t exited $$r after $$((SECONDS - start)) s"; [ $$r -eq 0 ] || s=1; done; exit $$s
test: setup lint kafka-jars kerberos-deps registry-app
ifeq ($(TEST_LANES),1)
	@$(call RUN_LANE,$(LANE1) $(LANE2))
else
	@set -o pipefail; \
	( $(call RUN_LANE,$(LANE1)) ) 2>&1 | sed -u 's/^/[lane 1] /' & one=$$!; \
	( $(call RUN_LANE,$(LANE2)) ) 2>&1 | sed -u 's/^/[lane 2] /'; two=$$?; \
	wait $$one; one=$$?; \
	echo "make test: lane 1 ($(strip $(LANE1))) exited $$one, lane 2 ($(strip $(LANE2))) $$two"; \
	exit $$(( one || two ))
endif

TANSU_SMOKE := tests/broker/test_sink_protocol.py tests/broker/test_tansu_quirks.py
test-tansu: setup
	EOSKAFKA_TEST_BROKER=tansu $(PY) -m pytest -q --durations=8 tests/unit tests/deploy $(TANSU_SMOKE)
	EOSKAFKA_TEST_BROKER=tansu $(PY) -m pytest -q --durations=8 -m "(smoke or tansu_only) and not faults" \
	  tests/broker tests/spark

test-tansu-all: setup registry-app
	EOSKAFKA_TEST_BROKER=tansu $(PY) -m pytest -q tests

test-kafka: kafka-jars kerberos-deps registry-app
	EOSKAFKA_TEST_BROKER=kafka $(PY) -m pytest -q --durations=12 -m "not faults" tests/broker tests/spark \
	  tests/formats

## The heavy fault cases on Apache Kafka (3-node coordinator and leader failover, transaction
## timeouts, driver kills): their own target, run by CI at a lane's end. Its two halves
## (the broker-level cases, the Spark ones) are targets too, so CI can put them in
## different lanes. The Spark half carries the payload explorer's daily seed
## (tests/formats/test_formats_explorer.py, about a minute; `make explore-formats`) and the
## dead-letter recipe through a driver kill (tests/formats/test_dead_letter_recovery.py).
test-kafka-faults: kafka-jars registry-app
	EOSKAFKA_TEST_BROKER=kafka $(PY) -m pytest -q --durations=12 -m faults tests/broker tests/spark \
	  tests/formats

test-kafka-faults-broker: kafka-jars
	EOSKAFKA_TEST_BROKER=kafka $(PY) -m pytest -q --durations=12 -m faults tests/broker

test-kafka-faults-spark: kafka-jars registry-app
	EOSKAFKA_TEST_BROKER=kafka $(PY) -m pytest -q --durations=12 -m faults tests/spark tests/formats

KAFKA39_TESTS := tests/broker/test_sink_protocol.py tests/broker/test_wire.py \
	tests/broker/test_batch_write_abort.py tests/broker/test_tansu_quirks.py
test-kafka39: kafka-jars
	EOSKAFKA_TEST_BROKER=kafka39 $(PY) -m pytest -q $(KAFKA39_TESTS)

## Apache Kafka 4.3, the release before the reference: the sink protocol, what differs
## from 4.4 (tests/broker/test_kafka44.py) and the OAUTHBEARER sign-in, kept small for CI.
KAFKA43_TESTS := tests/broker/test_sink_protocol.py tests/broker/test_kafka44.py \
	tests/broker/test_oauth.py
test-kafka43: kafka-jars
	EOSKAFKA_TEST_BROKER=kafka43 $(PY) -m pytest -q $(KAFKA43_TESTS)

## Everything except the heavy fault-injection cases (BROKER=kafka: on Apache Kafka 4.4).
BROKER ?= tansu
test-fast: setup registry-app
	EOSKAFKA_TEST_BROKER=$(BROKER) $(PY) -m pytest -q -m "not faults" tests

test-faults: setup
	EOSKAFKA_TEST_BROKER=$(BROKER) $(PY) -m pytest -q -m faults tests

## ruff over everything; mypy over the package ([tool.mypy] in pyproject.toml: the untyped
## kafka-python, aiokafka and pyarrow are Any, the rest is checked); lint-imports holds the
## import contracts in .importlinter (layers, no circle).
lint: setup
	$(VENV)/bin/ruff check --no-cache eos_kafka_source pyspark_eoskafka tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo --no-cache

## BROKER=kafka runs the demo on Apache Kafka 4.4 (a local JVM process) instead of Tansu,
## and checks the output with Kafka's own Java read_committed consumer too.
demo: setup
	$(PY) -m eos_kafka_source.demo --broker $(BROKER)

## The same demo against real Apache Kafka in Docker (needs a running Docker engine).
demo-docker:
	docker/demo-docker.sh

## Per-task and Spark figures on the embedded broker, then the side-by-side with Spark's
## own Kafka connector on Apache Kafka (bench-results/latest.md, bench-results/versus.md).
bench: bench-setup
	$(PY) -m benchmarks.throughput
	$(PY) -m benchmarks.throughput connector

## The benchmarks' extra (matplotlib: PNG charts beside their tables, benchmarks/common/charts.py).
BENCH_STAMP := $(VENV)/.installed-bench
bench-setup: $(BENCH_STAMP)

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[dev,bench]' --config-settings editable_mode=compat
	touch $(BENCH_STAMP)

## Produce-to-visible latency, Kafka -> Spark -> Kafka, Spark's connector vs eoskafka
## exactly-once and at-least-once, at 1k/20k/100k rec/s and three triggers, interleaved
## (bench-results/latency.md + .json + latency-cdf-*.png). ~30 min;
## LATENCY_ARGS="--step 15 --settle 5 --rates 20000 --triggers default" for a short one.
## Beside them, in the same tables: the floor of Spark's Python data source at the same rates,
## triggers and partitions, no Kafka (two waves of tasks and one; benchmarks/latency/floor.py).
## The published table (docs/performance.md, benchmarks/latency/current.json) comes from
## LATENCY_ARGS="--rates 2000 --triggers default,1s --variants 'Python floor: 2 partitions
## (one wave),built-in at-least-once,eoskafka exactly-once,built-in source + eoskafka
## exactly-once sink' --publish" (one line; --publish writes both).
LATENCY_ARGS ?=
bench-latency: bench-setup kafka-jars
	nice -n 0 $(PY) -m benchmarks.latency $(LATENCY_ARGS)

## Only the comparison with Spark's Kafka connector (Apache Kafka started by the benchmark).
bench-connector: bench-setup
	$(PY) -m benchmarks.throughput connector

## Avro end to end: eoskafka valueFormat=avro read and exactly-once write beside Spark's
## connector with spark-avro's from_avro/to_avro, Apache Kafka + Apicurio started by the
## benchmark (bench-results/formats.md + .json; benchmarks/formats/endtoend.py).
## FORMATS_ARGS="--records 100000 --runs 1" for a quick look.
FORMATS_ARGS ?=
bench-formats: bench-setup kafka-jars registry-app
	$(PY) -m benchmarks.formats $(FORMATS_ARGS)

## The driver's commit of one batch as tasks (64, 256, 1,000) and output partitions (8, 64)
## grow, on a 3-node Apache Kafka: bench-results/scale.md, .json, .png (docs/scale.md).
## SCALE_ARGS="--tasks 64 --partitions 8 --reps 1" for a quick look; the published table
## (docs/performance.md, benchmarks/scale/current.json: python -m benchmarks.published scale
## bench-results/scale.json) from SCALE_ARGS="--tasks 1000 --partitions 8 --first-batch --floor"
## (--floor: the brokers' floor, the bare EndTxn round, beside every repetition).
SCALE_ARGS ?=
bench-scale: bench-setup kafka-jars
	nice -n 10 $(PY) -m benchmarks.scale $(SCALE_ARGS)

## Long life: one exactly-once query for BATCHES small micro-batches (default 10,000; a few
## hours on 2 cores), sampling RSS, checkpoint and decision-log files, ids on the broker and
## commit time: bench-results/longrun.md + .json + PNG curves (benchmarks/longrun/).
BATCHES ?= 10000
bench-longrun: bench-setup kafka-jars
	$(PY) -m benchmarks.longrun --batches $(BATCHES)

## At-least-once vs exactly-once under the same faults, duplicates counted with Kafka's
## console consumer: bench-results/contrast.md and the contrast table in docs/performance.md.
contrast: setup
	$(PY) -m benchmarks.availability contrast

## Availability under Kafka's operations, Spark's connector beside eoskafka, on a 3-node
## Apache Kafka (benchmarks/availability/): faults by kind x moment, query failures and
## the longest stall per connector: bench-results/availability.md and .json.
## AVAILABILITY_ARGS=--short for the quick subset (not run by CI); --kinds/--moments/--seed.
AVAILABILITY_ARGS ?=
availability: kafka-jars
	nice -n 10 $(PY) -m benchmarks.availability $(AVAILABILITY_ARGS)

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
## driver is down, a start during a broker outage, Kafka's own abort tool on a decided
## transaction (recovery's read of the log cut once), a rewound checkpoint (refused by name,
## then restored), a failing decision store, a changed prefix, a commit whose marker is
## slow (an output leader paused during EndTxn); one of each (SOAK=N for a soak;
## CHAOS_OPERATOR_FAULTS=N: N kinds the seed picks; CHAOS_OPERATOR_KINDS=a,b: only these,
## one of each, e.g. CHAOS_OPERATOR_KINDS=slow_marker).
## CHAOS_OPERATOR_DEADLINE (default CHAOS_DEADLINE) bounds it.
CHAOS_OPERATOR_DEADLINE ?= $(CHAOS_DEADLINE)
CHAOS_OPERATOR_KINDS ?=
chaos-operator: kafka-jars
	SOAK=$(SOAK) $(PY) -m tests.chaos --broker kafka --operator \
	  $(if $(CHAOS_OPERATOR_KINDS),--only $(CHAOS_OPERATOR_KINDS)) \
	  $(if $(CHAOS_SEED),--seed $(CHAOS_SEED)) \
	  $(if $(CHAOS_OPERATOR_FAULTS),--faults $(CHAOS_OPERATOR_FAULTS)) \
	  $(if $(CHAOS_OPERATOR_DEADLINE),--deadline $(CHAOS_OPERATOR_DEADLINE))

## The failover check (issue 30; tests/chaos/failover.py), RUNS times in a row (default 10;
## CI runs it once): a 3-node Apache Kafka (min.insync.replicas=2) under a streaming query on
## a Spark standalone cluster; each commit step of the driver (before and after its decision,
## before the first EndTxn, between EndTxns, before and after marking it done) met by a kill -9
## of a transaction coordinator or an output leader in turn; then the driver SIGKILLed and
## restarted to drain on AvailableNow. A run passes on exactly once (oracle and Kafka's Java
## read_committed consumer), nothing open or hanging, and no failed query run. Prints each
## run's verdict and "failover: P of N runs passed"; exits non-zero unless all passed.
## FAILOVER_SEED=N replays one schedule; FAILOVER_DEADLINE=S bounds each run (default 900);
## FAILOVER_KAFKA=4.3 runs it on another pinned Apache Kafka line (default 4.4).
RUNS ?= 10
FAILOVER_SEED ?=
FAILOVER_DEADLINE ?= 900
FAILOVER_KAFKA ?=
failover: kafka-jars
	@passed=0; for run in $$(seq 1 $(RUNS)); do \
	  start=$$(date +%s); \
	  if $(PY) -m tests.chaos --broker kafka --failover --gap 1 3 \
	      --deadline $(FAILOVER_DEADLINE) $(if $(FAILOVER_SEED),--seed $(FAILOVER_SEED)) \
	      $(if $(FAILOVER_KAFKA),--kafka-version $(FAILOVER_KAFKA)); then \
	    passed=$$((passed + 1)); verdict=passed; else verdict=FAILED; fi; \
	  echo "failover run $$run of $(RUNS): $$verdict in $$(( $$(date +%s) - start )) s"; \
	done; \
	echo "failover: $$passed of $(RUNS) runs passed"; test $$passed -eq $(RUNS)

## The crash-point sweep's full matrix on Apache Kafka (tests/broker/test_crash_points.py):
## a driver SIGKILLed at every durable step's crash point (eos_kafka_source/sink/
## crash_points.py) x each operator action in the pause (none, kafka-transactions abort,
## eoskafka fence, a rewound checkpoint, a changed prefix, a failing decision store), then a
## restart. Prints the matrix (point, action, verdict, seconds) and writes
## bench-results/sweep.md. Then a Spark driver killed (or its commit raising) at every commit
## step and restarted from its checkpoint (tests/spark/test_sink_recovery.py; two of those
## steps run in `make test-kafka-faults`). Exits non-zero if either failed. The fast half
## (no operator action) runs in `make test-kafka-faults`.
SWEEP_RESULTS := $(abspath bench-results/sweep.jsonl)
sweep: kafka-jars
	@mkdir -p bench-results && rm -f $(SWEEP_RESULTS)
	@status=0; EOSKAFKA_SWEEP=full EOSKAFKA_SWEEP_RESULTS=$(SWEEP_RESULTS) EOSKAFKA_TEST_BROKER=kafka \
	  $(PY) -m pytest -q --durations=5 tests/broker/test_crash_points.py || status=$$?; \
	  $(PY) -m tests.crash_driver report $(SWEEP_RESULTS) bench-results/sweep.md; \
	  EOSKAFKA_SWEEP=full EOSKAFKA_TEST_BROKER=kafka $(PY) -m pytest -q \
	    tests/spark/test_sink_recovery.py -k "commit_step or commit_raising" || status=$$?; \
	  exit $$status

## The sequence explorer (tests/explorer; docs/chaos.md): SEEDS seeded
## random sequences (from FIRST_SEED) of batches, driver kills at any crash point, Kafka's
## abort tool, `eoskafka fence`, rewound checkpoints, prefix changes, decision-store failures
## and broker restarts on an Apache Kafka of its own; each judged from the outside, a failure
## shrunk to its shortest sequence and printed with its seed. EXPLORE_SEED=S replays one
## seed. About 30-60 s a sequence on a loaded 2-core machine. `make explore-ci`: the CI case
## (tests/broker/test_explorer.py: up to five seeds from the date, about 4 minutes).
SEEDS ?= 50
FIRST_SEED ?= 1
explore: kafka-jars
	$(PY) -m tests.explorer $(if $(EXPLORE_SEED),--seed $(EXPLORE_SEED),--seeds $(SEEDS) \
	  --first $(FIRST_SEED))

explore-ci: kafka-jars
	EOSKAFKA_TEST_BROKER=kafka $(PY) -m pytest -q -s tests/broker/test_explorer.py

## The payload explorer (tests/formats/explorer; CONTRIBUTING.md): generated Avro, Protobuf
## and JSON Schema schemas and values read and written by eoskafka and by the reference
## decoders (spark-avro's from_avro with fastavro and Confluent's deserializer; protobuf's
## runtime; jsonschema); a new difference is shrunk and printed as a test case, and the
## known-difference lists (tests/formats/explorer/known_differences/) are judged.
## FORMATS_SEEDS seeds of FORMATS_PER_SEED schemas per format from FORMATS_FIRST_SEED
## (default 20 x 100: 2,000 per format, about 7 min for Avro's on 2 busy cores, under a
## minute for the others); FORMATS_BUDGET=S stops each format's seeds after S seconds;
## FORMATS=avro (or protobuf, json) runs one. CI runs a seed of the date per format in
## `make test-kafka-faults-spark`.
FORMATS_SEEDS ?= 20
FORMATS_PER_SEED ?= 100
FORMATS_FIRST_SEED ?= 1
explore-formats: setup
	$(PY) -m tests.formats.explorer --seeds $(FORMATS_SEEDS) --first $(FORMATS_FIRST_SEED) \
	  --per-seed $(FORMATS_PER_SEED) $(if $(FORMATS_BUDGET),--budget $(FORMATS_BUDGET)) \
	  $(foreach f,$(FORMATS),--format $(f))

## Smoke set (pytest -m smoke) on every older supported Spark minor, each in its own venv
## (.venv-spark4.0 ...); the newest (4.3) is the main venv's and runs in `make test`.
## `make smoke-spark SMOKE_SPARK=4.1` runs one. pip's cache makes repeat installs quick. The
## README's snippet is left out there: the same code, run by make test on the newest pyspark
## (on Tansu and on Kafka 4.4), a minute a pyspark.
## `make smoke-spark-deps` only creates the venvs and installs each pyspark with eoskafka's
## dependencies (the long part, mostly download): CI runs it in the background beside `make
## test`. It leaves the checkout alone (no editable install: that writes eoskafka.egg-info,
## which the wheel test builds).
## Both hold a lock (.venv-spark.lock): a smoke run waits for installs still under way.
SMOKE_SPARK ?= 4.0 4.1 4.2
SMOKE_LOCK := .venv-spark.lock
## eoskafka's dependencies and its dev extra (pyproject.toml), quoted for the shell: the installs
## take them too, so the smoke run's editable install adds only eoskafka itself.
DEV_DEPS = $(shell $(PYTHON) -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
	print(' '.join(repr(d) for d in p['dependencies'] + p['optional-dependencies']['dev']))")
smoke-spark-deps:
	@set -e; exec 9>$(SMOKE_LOCK); flock 9; for v in $(SMOKE_SPARK); do \
	  venv=.venv-spark$$v; next=$$(echo $$v | awk -F. '{print $$1"."$$2+1}'); \
	  test -x $$venv/bin/python || $(PYTHON) -m venv $$venv; \
	  $$venv/bin/python -m pip install -q --upgrade pip; \
	  $$venv/bin/python -m pip install -q --no-compile "pyspark[connect]>=$$v,<$$next" $(DEV_DEPS); \
	done

smoke-spark:
	@set -e; exec 9>$(SMOKE_LOCK); flock 9; for v in $(SMOKE_SPARK); do \
	  venv=.venv-spark$$v; next=$$(echo $$v | awk -F. '{print $$1"."$$2+1}'); \
	  echo "== smoke on pyspark $$v.x ($$venv)"; \
	  test -x $$venv/bin/python || $(PYTHON) -m venv $$venv; \
	  $$venv/bin/python -m pip install -q --upgrade pip; \
	  $$venv/bin/python -m pip install -q "pyspark[connect]>=$$v,<$$next" $(EDITABLE); \
	  $$venv/bin/python -c "import pyspark; print('pyspark', pyspark.__version__)"; \
	  PYSPARK_PYTHON=$(CURDIR)/$$venv/bin/python PYSPARK_DRIVER_PYTHON=$(CURDIR)/$$venv/bin/python \
	    $$venv/bin/python -m pytest -q -m smoke -p no:cacheprovider tests \
	    --deselect tests/spark/test_docs_snippets.py::test_readme_read_and_write; \
	done

## Kept for scripts that call it: the smoke set on 4.0 only.
smoke-spark40:
	$(MAKE) smoke-spark SMOKE_SPARK=4.0

## A release, checked as a newcomer meets it; nothing is uploaded (tests/deploy/release.py):
## README's build block (`pip install build && python -m build`) in a clone of the checkout
## and a throwaway venv, `twine check --strict`, the wheel's version against
## eos_kafka_source.__version__; README's wheel install line (only the extras it names) in
## a fresh venv, `eoskafka --version`; README's quick start, verbatim, on the embedded
## broker. Leaves the sdist and wheel in dist/. CI runs the same steps as
## tests/deploy/test_wheel.py (make test-tansu), which also reruns the quick start.
release: setup
	$(PY) -m tests.deploy.release

clean:
	rm -rf $(VENV) .venv-spark* build dist *.egg-info .pytest_cache
