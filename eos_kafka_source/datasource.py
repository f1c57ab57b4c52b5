"""The ``eoskafka`` Spark data source: name, schema, and factories for readers and writers.

Spark instantiates :class:`EosKafkaDataSource` with the user's options in a
Python worker under the driver JVM and calls one factory there. Everything
below the factories is plain Python (``source/`` and ``sink/``); this module
only wires it to Spark.

>>> df = (spark.readStream.format("eoskafka")                     # doctest: +SKIP
...       .option("kafka.bootstrap.servers", "host:9092")
...       .option("subscribe", "events")
...       .load())
>>> (df.writeStream.format("eoskafka")                            # doctest: +SKIP
...    .option("kafka.bootstrap.servers", "host:9092").option("topic", "out")
...    .option("checkpointLocation", "/chk").start())
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .errors import ConfigError, user_facing
from .source.schema import kafka_schema


class EosKafkaDataSource(DataSource):
    """Kafka as a Spark source (batch and streaming) and exactly-once sink.

    Source options follow Spark's Kafka source (``subscribe``/``subscribePattern``/
    ``assign``, ``startingOffsets``, ``endingOffsets``, ``maxOffsetsPerTrigger``,
    ``failOnDataLoss``, ``includeHeaders``, ``kafka.*`` ...). Reads are
    read_committed by default, decided from the transaction markers in the log.
    """

    @classmethod
    def name(cls) -> str:
        return "eoskafka"

    @user_facing
    def schema(self) -> StructType:
        """Spark's first question on every path: the options are checked here, so a bad
        one is the first error a user reads (options/any_role.py)."""
        from .options.any_role import check_any_role

        check_any_role(self.options)
        base = kafka_schema(_include_headers(self.options))
        formats = _read_formats(self.options)
        if formats is None:
            return base
        from .formats.resolve import read_schema, resolve_read

        # The reader schemas are looked up here, once: Spark pickles this object to the
        # worker that creates the reader, which then decodes with exactly these.
        self._payload = (formats, resolve_read(formats))
        return read_schema(base, self._payload[1])

    def _read_plan(self, formats: Any, schema: StructType) -> Any:
        """The read's payload plan: the one :meth:`schema` resolved, else (a schema given
        with ``.schema(...)``) resolved now; the given schema checked against it."""
        if formats is None:
            return None
        from .formats.resolve import check_given, read_schema, resolve_read

        got = getattr(self, "_payload", None)
        plan = got[1] if got is not None and got[0] == formats else resolve_read(formats)
        check_given(schema, read_schema(kafka_schema(_include_headers(self.options)), plan))
        return plan

    @user_facing
    def reader(self, schema: StructType) -> DataSourceReader:
        from .options import SourceOptions
        from .source.batch_reader import EosKafkaBatchReader

        options = SourceOptions.parse(self.options, streaming=False)
        return EosKafkaBatchReader(options, schema, self._read_plan(options.formats, schema))

    @user_facing
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .options import SourceOptions
        from .source.stream_reader import EosKafkaStreamReader

        options = SourceOptions.parse(self.options, streaming=True)
        return EosKafkaStreamReader(options, schema, self._read_plan(options.formats, schema))

    @user_facing
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .sink.spark_writer import EosKafkaBatchWriter

        if overwrite:
            raise ConfigError(
                "save mode 'overwrite' is not allowed for Kafka (records cannot be replaced); "
                "write with .mode('append')"
            )
        return EosKafkaBatchWriter(dict(self.options), schema)

    @user_facing
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .sink.spark_writer import EosKafkaStreamWriter

        return EosKafkaStreamWriter(dict(self.options), schema)


def _read_formats(options: Any) -> Any:
    """A read's ReadFormats (None for raw payloads or a write); the options are valid."""
    from .client.keys import normalize_options
    from .formats.options import ReadFormats
    from .options import Subscription

    opts = normalize_options(options)
    if not {"subscribe", "subscribepattern", "assign"} & set(opts):
        return None  # a write: its writer resolves its schemas
    if not {"valueformat", "keyformat"} & set(opts):
        return None
    return ReadFormats.parse(opts, Subscription.parse(opts).named_topics)


def _include_headers(options: object) -> bool:
    """``includeHeaders`` (case-insensitive key); full validation happens in the readers."""
    for key, value in dict(options).items():  # type: ignore[call-overload]
        if key.lower() == "includeheaders":
            text = str(value).strip().lower()
            if text not in ("true", "false"):
                raise ConfigError(f"includeHeaders must be true or false, got {value!r}")
            return text == "true"
    return False
