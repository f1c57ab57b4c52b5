"""A generated case, a difference a reference found in it, and the one-schema lookup the
codecs read it with (no registry)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from eos_kafka_source.formats.schemas import RegisteredSchema
from tests.formats.explorer.values import dumps

#: The formats and the reference each is judged by (the known-difference file's name).
REFERENCES = {"avro": "spark_avro", "protobuf": "protobuf", "json": "jsonschema"}


@dataclass
class Case:
    """One schema and the values written with it (None: a null payload)."""

    fmt: str
    schema: Any
    values: list[Any]
    seed: int = 0
    index: int = 0

    @property
    def label(self) -> str:
        return f"{self.fmt} seed {self.seed} case {self.index}"

    def printed(self) -> str:
        """The case as one line of JSON: ``python -m tests.formats.explorer --case`` and
        the known-difference files take it back."""
        return dumps({"format": self.fmt, "schema": self.schema, "values": self.values})


@dataclass
class Difference:
    """Where eoskafka and the reference disagree on a case. ``check``: schema (one refuses
    what the other takes), type (the column types differ), read (rows differ), write (what
    eoskafka wrote does not read back equal)."""

    case: Case
    check: str
    detail: str
    features: set[str] = field(default_factory=set)

    def kind(self) -> tuple[str, str]:
        return self.case.fmt, self.check


class OneSchema:
    """A SchemaLookup holding a case's schemas by id (the codecs' registry, for a case)."""

    def __init__(self, *schemas: RegisteredSchema) -> None:
        self.schemas = {s.id: s for s in schemas}

    def by_id(self, schema_id: int) -> RegisteredSchema:
        return self.schemas[schema_id]

    def version(self, subject: str, version: int | str) -> RegisteredSchema:
        raise KeyError(subject)


def write_back(encoder: Any, values: pa.Array, keep: list[int]) -> tuple[list[Any], str | None]:
    """eoskafka's encoder writes back the kept rows it read: the payloads, or why it could
    not (eoskafka must write what it read, so an exception is a difference, not a crash)."""
    try:
        return encoder.encode(values.take(pa.array(keep, pa.int64())), "value").to_pylist(), None
    except Exception as exc:  # noqa: BLE001 - eoskafka must write what it read
        return [], f"eoskafka cannot write back what it read: {type(exc).__name__}: {exc}"
