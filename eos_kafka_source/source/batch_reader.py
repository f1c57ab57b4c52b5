"""The batch reader behind ``spark.read.format("eoskafka")``.

``partitions()`` runs in the Python planning worker under the driver JVM;
``read(partition)`` runs on executors on an unpickled copy of the reader (the
planner, which holds a connection, is not pickled). The range read is
``startingOffsets`` (default earliest) to ``endingOffsets`` (default latest:
the last stable offset under read_committed, so the read never waits on an
open transaction), read_committed from the log's own markers.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ..errors import user_facing
from ..formats.plans import ReadPlan
from ..options import SourceOptions
from .packing import to_input_partitions
from .partition_reader import read_input
from .planner import SourcePlanner


class EosKafkaBatchReader(DataSourceReader):
    """One bounded read of the subscribed partitions."""

    def __init__(self, options: SourceOptions, schema: StructType,
                 payload: ReadPlan | None = None) -> None:
        self.options = options
        self.schema = schema
        self.payload = payload

    @user_facing
    def partitions(self) -> list[InputPartition]:
        """Driver: resolve the offsets now and cut them into input partitions."""
        planner = SourcePlanner(self.options)
        try:
            return to_input_partitions(self.options, planner.batch_ranges(), self.payload)
        finally:
            planner.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor: the partition's visible records, as Arrow batches."""
        return read_input(partition, self.schema)
