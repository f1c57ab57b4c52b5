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

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import PayloadDecodeError
from .dead_letter import DEAD_LETTER_COLUMN, dead_letters
from .header_ids import prefixed
from .plans import ReadPlan, WritePlan, codec, registry_client
from .resolve import ERROR_COLUMN, SCHEMA_ID_COLUMN
from .schemas import FAILFAST, Decoded, PayloadDecoder, PayloadEncoder


class Decoding:
    """Turns Kafka-schema batches into the declared schema's batches."""

    def __init__(self, plan: ReadPlan, schema: pa.Schema) -> None:
        self.plan = plan
        self.schema = schema
        self._decoders: dict[str, PayloadDecoder] | None = None
        self._client: Any = None

    def _built(self) -> dict[str, PayloadDecoder]:
        if self._decoders is None:
            self._client = registry_client(self.plan.registry)
            self._decoders = {s.side: s.decoder(self._client, self.plan.mode)
                              for s in self.plan.sides}
        return self._decoders

    def _decode(self, side: str, decoder: PayloadDecoder, batch: pa.RecordBatch,
                where: Callable[[int], str]) -> Decoded:
        """One side decoded; a schema id in the record's header (header_ids.py) counts as
        its prefix, and a header that does not resolve makes the row a bad record."""
        headers = batch.column("headers") if "headers" in batch.schema.names else None
        payloads, failed = prefixed(batch.column(side), headers, side, self._client)
        result = decoder.decode(payloads, where)
        ids = result.schema_ids
        if pc.any(pc.less(ids, 0)).as_py():  # a GUID's stand-in id: the registry gave none
            ids = pc.if_else(pc.less(ids, 0), pa.scalar(None, ids.type), ids)
        if not failed:
            return Decoded(result.values, ids, result.errors)
        if self.plan.mode == FAILFAST:
            i = min(failed)
            raise PayloadDecodeError(
                f"the {side} at {where(i)} does not decode: {failed[i]}. Or read with mode "
                "PERMISSIVE to keep such rows as null with their reason")
        errors = (result.errors.to_pylist() if result.errors is not None
                  else [None] * len(payloads))
        for i, why in failed.items():
            errors[i] = f"the payload's schema id header does not resolve: {why}"
        return Decoded(result.values, ids, pa.array(errors, pa.string()))

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        topic = batch.column("topic")
        partition = batch.column("partition")
        offset = batch.column("offset")

        def where(i: int) -> str:
            return f"{topic[i].as_py()}-{partition[i].as_py()} at offset {offset[i].as_py()}"

        decoded: dict[str, Decoded] = {
            side: self._decode(side, decoder, batch, where)
            for side, decoder in self._built().items()}
        columns: dict[str, Any] = {}
        for side, result in decoded.items():
            columns[side] = result.values
            columns[SCHEMA_ID_COLUMN.format(side=side)] = result.schema_ids
            errors = result.errors
            columns[ERROR_COLUMN.format(side=side)] = (
                errors if errors is not None else pa.nulls(len(batch), pa.string()))
        if self.plan.include_dead_letter:
            columns[DEAD_LETTER_COLUMN] = dead_letters(
                batch, {side: r.errors for side, r in decoded.items()},
                self.schema.field(DEAD_LETTER_COLUMN).type)
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


def decoded(plan: ReadPlan, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
            ) -> Iterator[pa.RecordBatch]:
    """A read's Kafka-schema ``batches`` (headers included) as batches of the declared
    ``schema``: the one entry a partition's read hands its batches to, the decoders built
    when the first batch comes (on the executor, once per task)."""
    yield from Decoding(plan, schema).batches(batches)


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
