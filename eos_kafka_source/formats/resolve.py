"""Driver side: the reader and writer schemas of a query, looked up once when it starts.

A read's reader schema (the subject's latest version, a version, an id or given text) and
a write's writer schema (registered, the latest, or looked up) are resolved here into the
plans of :mod:`.plans`, and the Spark column types they give are checked here, so a query
that cannot work fails before any task runs: an incompatible schema with the registry's
reasons, a column that does not fit, a user schema that is not the decoded one.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql.types import DataType, IntegerType, StringType, StructField, StructType

from ..errors import ConfigError, SchemaError
from .dead_letter import DEAD_LETTER_COLUMN, dead_letter_type
from .options import ReadFormats, ReadSide, WriteFormats, WriteSide
from .plans import ReadPlan, SideRead, SideWrite, WritePlan, codec, registry_client
from .registry import SchemaRegistry
from .schemas import PERMISSIVE, RegisteredSchema, SchemaLookup

#: Columns a read adds: each record's writer schema id (``includeSchemaId``), and in
#: PERMISSIVE mode why a payload did not decode.
SCHEMA_ID_COLUMN = "{side}SchemaId"
ERROR_COLUMN = "{side}Error"


# -- reads ---------------------------------------------------------------------------------


def _reader_schema(side: ReadSide, client: SchemaLookup) -> RegisteredSchema:
    if side.schema_id is not None:
        return client.by_id(side.schema_id)
    if side.text is not None:  # not registered: id 0, which no registry hands out
        return RegisteredSchema(0, side.schema_type, side.text)
    assert side.subject is not None
    return client.version(side.subject, side.version if side.version is not None else "latest")


def resolve_read(formats: ReadFormats) -> ReadPlan:
    """The reader schema of each non-raw side, from the registry, with its Arrow type."""
    client = registry_client(formats.registry)
    sides = []
    for side in formats.sides:
        reader = _reader_schema(side, client)
        if reader.schema_type != side.schema_type:
            raise ConfigError(
                f"{side.side}Format={side.format} but the reader schema "
                f"({_named(side, reader)}) is {reader.schema_type}; set {side.side}Format "
                f"to match it or choose another schema.")
        fmt: Any = codec(side.module)
        extra = {"message": side.message} if side.message is not None else {}
        arrow = fmt.arrow_type(reader, client, **extra)
        sides.append(SideRead(side.side, side.module, reader, arrow, side.message))
    return ReadPlan(tuple(sides), formats.registry, formats.mode, formats.include_schema_id,
                    formats.include_dead_letter)


def _named(side: ReadSide, reader: RegisteredSchema) -> str:
    where = f"subject {reader.subject} version {reader.version}" if reader.subject else \
        "given as text" if side.text is not None else f"id {reader.id}"
    return f"id {reader.id}, {where}" if reader.subject else where


def spark_type(arrow: pa.DataType) -> DataType:
    """The Spark type of a decoded column (pyspark's own conversion)."""
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(arrow)


def read_schema(kafka: StructType, plan: ReadPlan) -> StructType:
    """The Kafka source schema with ``value``/``key`` as the decoded types, then the
    schema-id columns (``includeSchemaId``) and, in PERMISSIVE mode, the error columns and
    the ``deadLetter`` column (``includeDeadLetter``)."""
    types = {s.side: spark_type(s.arrow_type) for s in plan.sides}
    fields = [StructField(f.name, types.get(f.name, f.dataType), True) for f in kafka.fields]
    names = [s.side for s in plan.sides]
    if plan.include_schema_id:
        fields += [StructField(SCHEMA_ID_COLUMN.format(side=n), IntegerType()) for n in names]
    if plan.mode == PERMISSIVE:
        fields += [StructField(ERROR_COLUMN.format(side=n), StringType()) for n in names]
    if plan.include_dead_letter:
        fields.append(StructField(DEAD_LETTER_COLUMN, dead_letter_type()))
    return StructType(fields)


def check_given(given: StructType, expected: StructType) -> None:
    """A schema given with ``.schema(...)`` must name columns of the decoded schema with
    their decoded types (a subset is fine); else it is refused, saying what to use."""
    types = {f.name: f.dataType for f in expected.fields}
    for field in given.fields:
        have = types.get(field.name)
        if have is None or have.simpleString() != field.dataType.simpleString():
            wanted = "no such column" if have is None else have.simpleString()
            raise SchemaError(
                f"the schema given with .schema(...) has {field.name} "
                f"{field.dataType.simpleString()}, but this read gives {wanted}; drop "
                f".schema(...) (the reader schema decides the columns) or match it: "
                f"{expected.simpleString()}")


# -- writes --------------------------------------------------------------------------------

#: Writer plans this process resolved: a streaming writer is created before every batch,
#: and registering (or looking up) the same schema again would be one more request each.
_RESOLVED: dict[tuple[Any, ...], WritePlan] = {}


def column_arrow_type(data_type: DataType) -> pa.DataType:
    """The Arrow type the sink's tasks receive a Spark column in."""
    from pyspark.sql.pandas.types import to_arrow_type

    try:
        return to_arrow_type(data_type, timezone="UTC")
    except TypeError:  # pyspark < 4.2 has no ``timezone`` keyword (and uses UTC)
        return to_arrow_type(data_type)


def resolve_write(formats: WriteFormats, topic: str | None, schema: StructType) -> WritePlan:
    """Each non-raw side's writer schema, by ``auto.register.schemas``/``use.latest.version``
    as Confluent's serializers choose it; refused (before any task) when it cannot work."""
    key = (formats, topic, schema.json())
    plan = _RESOLVED.get(key)
    if plan is None:
        client = registry_client(formats.registry)
        columns = {f.name.lower(): f for f in schema.fields}
        sides = tuple(_writer_schema(formats, side, topic, columns, client)
                      for side in formats.sides)
        plan = _RESOLVED[key] = WritePlan(sides, formats.registry)
    return plan


def _writer_schema(formats: WriteFormats, side: WriteSide, topic: str | None,
                   columns: dict[str, StructField], client: SchemaRegistry) -> SideWrite:
    field = columns.get(side.side)
    if field is None:
        raise SchemaError(f"{side.side}Format={side.format} but the input has no "
                          f"'{side.side}' column; select one (a struct) or drop "
                          f"{side.side}Format.")
    arrow = column_arrow_type(field.dataType)
    fmt = codec(side.module)
    text = fmt.schema_for(arrow, name=formats.record_name, namespace=formats.record_namespace)
    record = ".".join(p for p in (formats.record_namespace, formats.record_name) if p)
    subject = side.subject_for(topic, record)
    if subject is None:
        raise ConfigError(
            f"{side.side}Format={side.format} with a topic column and "
            f"{side.side}.subject.name.strategy={side.strategy}: the subject would depend on "
            f"each row's topic. Set the topic option, or "
            f"{side.side}.subject.name.strategy=RecordNameStrategy, or {side.side}Subject.")
    if formats.auto_register:  # SchemaIncompatibleError, with the registry's reasons
        schema_id = client.register(subject, text, side.schema_type)
        registered = RegisteredSchema(schema_id, side.schema_type, text, subject)
    elif formats.use_latest:
        registered = client.version(subject, "latest")
        _check_fits(side, field, registered, fmt.arrow_type(registered, client))
    else:
        found = client.lookup(subject, text, side.schema_type)
        if found is None:
            raise SchemaError(
                f"the {side.schema_type} schema of column '{side.side}' is not registered "
                f"under subject '{subject}' (auto.register.schemas=false): register it, set "
                f"auto.register.schemas=true, or use.latest.version=true. The schema: {text}")
        registered = found
    return SideWrite(side.side, side.module, registered)


def _check_fits(side: WriteSide, field: StructField, schema: RegisteredSchema,
                arrow: pa.DataType) -> None:
    """``use.latest.version``: the column's fields are the schema's, and the schema's fields
    the column lacks are nullable; types are checked row by row by the encoder."""
    have = column_arrow_type(field.dataType)
    if not (pa.types.is_struct(arrow) and pa.types.is_struct(have)):
        return
    theirs = {f.name: f for f in arrow}
    ours = {f.name for f in have}
    extra = sorted(ours - set(theirs))
    missing = sorted(n for n, f in theirs.items() if n not in ours and not f.nullable)
    if extra or missing:
        what = "; ".join(p for p in (
            f"fields not in the schema: {', '.join(extra)}" if extra else "",
            f"required fields missing: {', '.join(missing)}" if missing else "") if p)
        raise SchemaError(
            f"column '{side.side}' does not fit the latest schema of subject "
            f"{schema.subject} (version {schema.version}, id {schema.id}): {what}. Select "
            f"the schema's fields, or register a new version.")
