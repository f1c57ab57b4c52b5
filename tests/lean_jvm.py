"""Every JVM the tests start runs lean: C1 only, the serial collector, no perf data.

CI runs the whole suite, both chaos rounds and the smoke set on two cores, where it is bound
by CPU, and most of that CPU is JVMs: Kafka brokers, Spark drivers, Spark Connect servers,
admin tools, each with little to do, so a JIT's second tier and a parallel collector are
overhead. Measured 2026-11-26: the tests' Spark driver through tests/spark/test_source_batch.py
32.9 -> 16.6 CPU-s, a 1-node Kafka broker started and given 40,000 transactional records
11.5-12.0 -> 6.2-7.5 CPU-s (eos_kafka_source/apache_kafka/jars.py). Brokers get it from
tests/kafka_clusters.py (``lean_jvm``); Spark's JVMs from the environment, inherited by every
process a test starts: ``SPARK_SUBMIT_OPTS`` reaches every JVM ``spark-submit`` launches (a
SparkSession's, a subprocess driver's, a Spark Connect server's), ``SPARK_DAEMON_JAVA_OPTS``
a standalone master's and workers'. An option set by the caller is kept. Benchmarks never
import this: they measure peak throughput.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import TypeVar

from eos_kafka_source.apache_kafka.jars import LEAN_JVM_OPTIONS

LEAN = " ".join(LEAN_JVM_OPTIONS)

Env = TypeVar("Env", bound=MutableMapping[str, str])


def lean_spark_jvms(env: Env) -> Env:
    """``env`` with lean Spark driver and daemon JVMs (``os.environ`` for this process)."""
    env.setdefault("SPARK_SUBMIT_OPTS", LEAN)
    env.setdefault("SPARK_DAEMON_JAVA_OPTS", LEAN)
    return env
