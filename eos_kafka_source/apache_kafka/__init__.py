"""Apache Kafka itself, run as a local JVM process: for tests, the demo and trying things out.

Tansu (``eos_kafka_source.broker``) is the pip-only development broker; this is the
reference. Jars come from Maven Central once (``jars``), a node or a cluster of
three runs in KRaft mode on loopback (``cluster``), and Kafka's own command-line
tools run from the same jars (``tools``).

>>> with KafkaCluster(nodes=1) as kafka:          # doctest: +SKIP
...     print(kafka.bootstrap_servers)
127.0.0.1:53123
"""

from __future__ import annotations

from .cluster import KafkaCluster, ListenerSpec
from .jars import DEFAULT_VERSION, SUPPORTED_VERSIONS, KafkaToolsMissingError, kafka_jars
from .tools import KafkaTools

__all__ = [
    "DEFAULT_VERSION",
    "SUPPORTED_VERSIONS",
    "KafkaCluster",
    "KafkaTools",
    "KafkaToolsMissingError",
    "ListenerSpec",
    "kafka_jars",
]
