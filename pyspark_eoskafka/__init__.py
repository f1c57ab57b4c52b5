"""Static registration shim: Spark looks up ``pyspark_<name>.DefaultSource``.

With this package installed, ``spark.readStream.format("eoskafka")`` works with
no ``register()`` call (pyspark >= 4.0).
"""

from eos_kafka_source.datasource import EosKafkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
