"""eoskafka: exactly-once Kafka for Spark Structured Streaming (Python Data Source API).

>>> import eos_kafka_source                                  # doctest: +SKIP
>>> eos_kafka_source.register(spark)
>>> df = (spark.readStream.format("eoskafka")
...       .option("kafka.bootstrap.servers", "host:9092")
...       .option("subscribe", "events").load())

With the package installed, ``format("eoskafka")`` also works without
``register()`` (Spark finds ``pyspark_eoskafka.DefaultSource``). Importing this
package does not import pyspark.

This module is the package's face, above every other: no module of the package imports
it (the version lives in ``_version.py``), so :func:`register` may name the Spark-facing
shell, and only when called.
"""

from __future__ import annotations

from typing import Any

from . import logs
from ._version import __version__

__all__ = ["__version__", "register"]

logs.configure()  # EOSKAFKA_LOG_LEVEL: eoskafka's INFO lines on stderr (logs.py)


def register(spark: Any) -> None:
    """Register the ``eoskafka`` data source with ``spark`` (a SparkSession).

    Calling it again (a notebook cell run twice) is harmless: pyspark 4.0 refuses a second
    registration of the name, or one beside the installed package's own
    (``pyspark_eoskafka``), with DATA_SOURCE_ALREADY_EXISTS; the source is there either way.
    """
    from .datasource import EosKafkaDataSource

    try:
        spark.dataSource.register(EosKafkaDataSource)
    except Exception as exc:  # noqa: BLE001 - pyspark's AnalysisException, kept lazy
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise
