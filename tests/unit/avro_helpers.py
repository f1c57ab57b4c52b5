"""A schema lookup held in memory, for the codec tests (no claim about any registry)."""

from __future__ import annotations

import json
from typing import Any

from eos_kafka_source.errors import SchemaNotFoundError, SchemaRegistryError
from eos_kafka_source.formats.schemas import AVRO, RegisteredSchema, SchemaReference


class Lookup:
    """Schemas by id and by (subject, version); ``down`` makes every call fail."""

    def __init__(self) -> None:
        self.ids: dict[int, RegisteredSchema] = {}
        self.subjects: dict[tuple[str, int], RegisteredSchema] = {}
        self.calls = 0
        self.down = False

    def add(self, schema: Any, subject: str | None = None,
            references: tuple[SchemaReference, ...] = ()) -> RegisteredSchema:
        text = schema if isinstance(schema, str) else json.dumps(schema)
        version = 1 + sum(1 for s, _ in self.subjects if s == subject)
        reg = RegisteredSchema(len(self.ids) + 1, AVRO, text, subject, version, references)
        self.ids[reg.id] = reg
        if subject is not None:
            self.subjects[(subject, version)] = reg
        return reg

    def by_id(self, schema_id: int) -> RegisteredSchema:
        self.calls += 1
        if self.down:
            raise SchemaRegistryError("registry http://registry:8081 did not answer")
        if schema_id not in self.ids:
            raise SchemaNotFoundError(f"schema id {schema_id} not found")
        return self.ids[schema_id]

    def version(self, subject: str, version: int | str) -> RegisteredSchema:
        if version == "latest":
            version = max(v for s, v in self.subjects if s == subject)
        return self.subjects[(subject, int(version))]


def where(i: int) -> str:
    return f"orders-3 at offset {100 + i}"
