"""Avro cases against the references, both directions.

Read: fastavro writes each value with its schema (the exact bytes chosen), Confluent's
framing goes in front; eoskafka's decoder (PERMISSIVE, so a refused record is an error on
its row) and spark-avro's ``from_avro`` (PERMISSIVE: null) read the same bytes, and must
give the same column type, the same rows and refuse the same records. Write: eoskafka
encodes the rows it read; fastavro (raw values) and Confluent's AvroDeserializer (logical
values, through its mock registry) read them back equal to what they read from the
original bytes. An evolved case (avro_evolve.py) is read through spark-avro's
``avroSchema`` option; what eoskafka writes back from it must read with the reader's
schema (fastavro's own resolution of the original is no reference: it takes a union's first
promotable branch where Avro's Java takes the exact one).
"""

from __future__ import annotations

import json
import struct
from io import BytesIO
from typing import Any

import fastavro
import pyarrow as pa
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
    MockSchemaRegistryClient,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from eos_kafka_source.formats import avro
from eos_kafka_source.formats.resolve import spark_type
from eos_kafka_source.formats.schemas import AVRO, PERMISSIVE, RegisteredSchema
from tests.formats.explorer import spark_avro
from tests.formats.explorer.arrow_compare import plain_rows, row_difference
from tests.formats.explorer.avro_evolve import evolved, reader_of, writer_of
from tests.formats.explorer.avro_evolve import features as evolution_features
from tests.formats.explorer.avro_features import features
from tests.formats.explorer.avro_gen import strip_logical
from tests.formats.explorer.cases import Case, Difference, OneSchema, write_back
from tests.formats.explorer.values import first_difference

_CONTEXT = SerializationContext("explore", MessageField.VALUE)


def _where(i: int) -> str:
    return f"row {i}"


class _Prepared:
    """A case's bytes and eoskafka's reading of them. An evolved case (avro_evolve.py) is
    written with its writer's schema (``writer_id`` in the headers) and read as its
    reader's (``reader_id``); otherwise both are the one schema."""

    def __init__(self, case: Case, writer_id: int, reader_id: int) -> None:
        self.case = case
        writer, reader = writer_of(case.schema), reader_of(case.schema)
        self.evolved = evolved(case.schema)
        self.writer_text, self.text = json.dumps(writer), json.dumps(reader)
        self.registered = RegisteredSchema(reader_id, AVRO, self.text)
        written = RegisteredSchema(writer_id, AVRO, self.writer_text)
        self.lookup = OneSchema(self.registered, written)
        self.writer_parsed = fastavro.parse_schema(strip_logical(writer))
        self.parsed = (fastavro.parse_schema(strip_logical(reader)) if self.evolved
                       else self.writer_parsed)
        header = b"\x00" + struct.pack(">I", writer_id)
        self.bodies: list[bytes | None] = []
        for value in case.values:
            if value is None:
                self.bodies.append(None)
                continue
            out = BytesIO()
            fastavro.schemaless_writer(out, self.writer_parsed, value)
            self.bodies.append(out.getvalue())
        self.framed = [None if b is None else header + b for b in self.bodies]
        self.refused: str | None = None
        self.arrow: pa.DataType | None = None
        self.values: pa.Array | None = None
        self.errors: list[str | None] = []
        self.crash: str | None = None
        try:
            decoder = avro.decoder(self.registered, self.lookup, mode=PERMISSIVE)
        except Exception as exc:  # noqa: BLE001 - a refusal is compared with Spark's
            self.refused = f"{type(exc).__name__}: {exc}"
            return
        self.arrow = decoder.arrow_type
        try:
            decoded = decoder.decode(pa.array(self.framed, pa.binary()), _where)
        except Exception as exc:  # noqa: BLE001 - PERMISSIVE must not raise
            self.crash = f"eoskafka's PERMISSIVE decode raised {type(exc).__name__}: {exc}"
            return
        self.values = decoded.values
        self.errors = (decoded.errors.to_pylist() if decoded.errors is not None
                       else [None] * len(self.framed))

    @property
    def spark_case(self) -> Any:
        """(writer JSON, reader JSON or None): how from_avro is called for this case."""
        return self.writer_text, self.text if self.evolved else None

    def resolved(self, body: bytes) -> Any:
        """What fastavro reads from ``body`` (the writer's bytes, not evolved)."""
        return fastavro.schemaless_reader(BytesIO(body), self.writer_parsed, None)


def check(cases: list[Case], spark: Any) -> tuple[list[Difference], int]:
    """Differences in ``cases`` and how many were skipped (fastavro would not write)."""
    mock = MockSchemaRegistryClient({"url": "mock://explore"})
    prepared: list[_Prepared] = []
    skipped = 0
    for k, case in enumerate(cases):
        subject = f"c{k}-{case.seed}-{case.index}"
        ids = [mock.register_schema(subject, Schema(json.dumps(s), "AVRO"))
               for s in (writer_of(case.schema), reader_of(case.schema))]
        try:
            prepared.append(_Prepared(case, *ids))
        except Exception:  # noqa: BLE001 - fastavro cannot write it: not a case
            skipped += 1
    reads = spark_avro.read_all(spark, [(*p.spark_case, p.bodies) for p in prepared])
    deserializer = AvroDeserializer(mock)
    found: list[Difference] = []
    for p, theirs in zip(prepared, reads, strict=True):
        tags = features(writer_of(p.case.schema)) | features(reader_of(p.case.schema))
        if p.evolved:
            tags |= evolution_features(writer_of(p.case.schema), reader_of(p.case.schema))
        found += [Difference(p.case, check, detail, tags)
                  for check, detail in _compare(p, theirs, deserializer, spark)]
    return found, skipped


def _compare(p: _Prepared, theirs: spark_avro.SparkRead, deserializer: Any, spark: Any
             ) -> list[tuple[str, str]]:
    if p.crash:
        return [("read", p.crash)]
    if p.refused or (theirs.refused and theirs.data_type is None):
        if p.refused and theirs.refused:
            return []
        if p.refused:
            return [("schema", f"eoskafka refuses a schema spark-avro reads: {p.refused}")]
        return [("schema", f"{theirs.refused}; eoskafka reads it as {p.arrow}")]
    out: list[tuple[str, str]] = []
    ours_type = spark_type(p.arrow)
    if ours_type != theirs.data_type:
        out.append(("type", _type_difference(ours_type.jsonValue(),
                                             theirs.data_type.jsonValue())))
        return out
    read = _compare_rows(p, theirs, spark)
    if read:
        out.append(("read", read))
    write = _write_back(p, deserializer)
    if write:
        out.append(("write", write))
    return out


def _all_null(row: Any) -> bool:
    return isinstance(row, dict) and all(v is None for v in row.values())


def _compare_rows(p: _Prepared, theirs: spark_avro.SparkRead, spark: Any) -> str | None:
    assert p.values is not None
    ours = plain_rows(p.values)
    if theirs.rows is None:
        if all(e is not None or b is None for e, b in zip(p.errors, p.bodies, strict=True)):
            return None
        return f"{theirs.refused}; eoskafka reads every record"
    try:
        spark_rows = plain_rows(theirs.rows)
    except Exception as exc:  # noqa: BLE001
        return f"spark-avro's rows do not convert: {exc}"
    for i, body in enumerate(p.bodies):
        if body is None:
            continue
        if p.errors[i] is not None and spark_rows[i] is not None and not (
                _all_null(spark_rows[i]) and spark_avro.fails(spark, p.spark_case, body)):
            return f"row {i}: eoskafka refuses a record spark-avro reads: {p.errors[i]}"
        if p.errors[i] is None and spark_rows[i] is None:
            return f"row {i}: spark-avro refuses a record (null) eoskafka reads: {ours[i]!r}"
        if p.errors[i] is not None:  # both refuse it
            ours[i] = spark_rows[i] = None
    return row_difference(ours, spark_rows)


def _write_back(p: _Prepared, deserializer: Any) -> str | None:
    """eoskafka writes back the rows it read; the references read them equal."""
    assert p.values is not None
    keep = [i for i, b in enumerate(p.bodies) if b is not None and p.errors[i] is None]
    if not keep:
        return None
    written, failed = write_back(avro.encoder(p.registered, p.lookup), p.values, keep)
    if failed:
        return failed
    for i, again in zip(keep, written, strict=True):
        original = p.framed[i]
        assert original is not None
        if again == original:
            continue
        if again is None or again[:5] != b"\x00" + struct.pack(">I", p.registered.id):
            return f"row {i}: eoskafka wrote {again!r:.80}, header differs"
        try:
            raw = fastavro.schemaless_reader(BytesIO(again[5:]), p.parsed, None)
        except Exception as exc:  # noqa: BLE001
            return f"row {i}: fastavro cannot read what eoskafka wrote: {exc}"
        if p.evolved:
            # fastavro resolves a union branch by the first promotable reader branch where
            # Avro's Java (spark-avro) takes the exact one first: its reading of the
            # original is no reference; the rows themselves were compared with Spark's.
            continue
        diff = first_difference(raw, p.resolved(original[5:]), f"row {i}")
        if diff:
            return f"fastavro reads eoskafka's bytes differently: {diff}"
        try:
            before = deserializer(original, _CONTEXT)
        except Exception:  # noqa: BLE001 - Confluent's cannot read the original itself
            continue
        try:
            after = deserializer(again, _CONTEXT)
        except Exception as exc:  # noqa: BLE001
            return f"row {i}: Confluent's deserializer cannot read what eoskafka wrote: {exc}"
        diff = first_difference(after, before, f"row {i}")
        if diff:
            return f"Confluent's deserializer reads eoskafka's bytes differently: {diff}"
    return None


def _type_difference(ours: Any, theirs: Any) -> str:
    """Where two Spark types (as JSON) first differ: nullability, names or types."""
    found = first_difference(ours, theirs, "type")
    return f"eoskafka's and spark-avro's column types differ at {found}"
