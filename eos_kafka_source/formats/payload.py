"""Executor side: decode a read's and encode a write's payload columns, one Arrow batch
at a time.

Reads: the partition reader yields batches of the Kafka source schema (binary ``value``
and ``key``, visible records only: read_committed is decided before this); each becomes a
batch of the declared schema with the decoded columns. Writes: a task's input batches get
their struct ``value``/``key`` encoded to binary before the exactly-once writer sees them,
so what it produces and commits is unchanged. Decoders and encoders are built once per
task from the plan's picklable schemas; the registry client caches writer schemas by id.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from .plans import ReadPlan, WritePlan, codec, registry_client
from .resolve import ERROR_COLUMN, SCHEMA_ID_COLUMN
from .schemas import Decoded, PayloadDecoder, PayloadEncoder


class Decoding:
    """Turns Kafka-schema batches into the declared schema's batches."""

    def __init__(self, plan: ReadPlan, schema: pa.Schema) -> None:
        self.plan = plan
        self.schema = schema
        self._decoders: dict[str, PayloadDecoder] | None = None

    def _built(self) -> dict[str, PayloadDecoder]:
        if self._decoders is None:
            client = registry_client(self.plan.registry)
            self._decoders = {s.side: s.decoder(client, self.plan.mode)
                              for s in self.plan.sides}
        return self._decoders

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        topic = batch.column("topic")
        partition = batch.column("partition")
        offset = batch.column("offset")

        def where(i: int) -> str:
            return f"{topic[i].as_py()}-{partition[i].as_py()} at offset {offset[i].as_py()}"

        decoded: dict[str, Decoded] = {
            side: decoder.decode(batch.column(side), where)
            for side, decoder in self._built().items()}
        columns: dict[str, Any] = {}
        for side, result in decoded.items():
            columns[side] = result.values
            columns[SCHEMA_ID_COLUMN.format(side=side)] = result.schema_ids
            errors = result.errors
            columns[ERROR_COLUMN.format(side=side)] = (
                errors if errors is not None else pa.nulls(len(batch), pa.string()))
        arrays = []
        for field in self.schema:
            array = columns.get(field.name)
            if array is None:
                array = batch.column(field.name)
            if array.type != field.type:
                array = array.cast(field.type)
            arrays.append(array)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def batches(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield self.apply(batch)


class Encoding:
    """Encodes a write's struct columns to binary in the wire format."""

    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan
        self._encoders: dict[str, PayloadEncoder] | None = None

    def _built(self) -> dict[str, PayloadEncoder]:
        if self._encoders is None:
            client = registry_client(self.plan.registry)
            self._encoders = {s.side: codec(s.module).encoder(s.schema, client)
                              for s in self.plan.sides}
        return self._encoders

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = {n.lower(): i for i, n in enumerate(batch.schema.names)}
        arrays = list(batch.columns)
        fields = list(batch.schema)
        for side, encoder in self._built().items():
            i = names[side]
            arrays[i] = encoder.encode(batch.column(i), fields[i].name)
            fields[i] = pa.field(fields[i].name, pa.binary())
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))

    def batches(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield self.apply(batch)
