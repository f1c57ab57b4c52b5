"""In-memory SchemaLookups for the codec unit tests: a dict of schemas, and an adapter over
Confluent's ``mock://`` registry client (the registry its own serializers talk to)."""

from __future__ import annotations

from typing import Any

from eos_kafka_source.errors import SchemaNotFoundError
from eos_kafka_source.formats.schemas import RegisteredSchema, SchemaReference


class DictLookup:
    """Schemas by id, and by (subject, version) for references."""

    def __init__(self, *schemas: RegisteredSchema) -> None:
        self.by_number = {s.id: s for s in schemas}
        self.versions = {(s.subject, s.version): s for s in schemas if s.subject}
        self.asked: list[int] = []

    def by_id(self, schema_id: int) -> RegisteredSchema:
        self.asked.append(schema_id)
        if schema_id not in self.by_number:  # as the registry client says it
            raise SchemaNotFoundError(f"schema id {schema_id} is not in the registry")
        return self.by_number[schema_id]

    def version(self, subject: str, version: int | str) -> RegisteredSchema:
        return self.versions[(subject, int(version))]


def _registered(schema_id: int, schema: Any, subject: str | None = None,
                version: int | None = None) -> RegisteredSchema:
    refs = tuple(SchemaReference(r.name, r.subject, r.version)
                 for r in (schema.references or ()))
    return RegisteredSchema(schema_id, schema.schema_type or "AVRO", schema.schema_str,
                            subject, version, refs)


class MockRegistryLookup:
    """A SchemaLookup over confluent_kafka's mock registry client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def by_id(self, schema_id: int) -> RegisteredSchema:
        return _registered(schema_id, self.client.get_schema(schema_id))

    def version(self, subject: str, version: int | str) -> RegisteredSchema:
        found = (self.client.get_latest_version(subject) if version == "latest"
                 else self.client.get_version(subject, int(version)))
        return _registered(found.schema_id, found.schema, found.subject, found.version)
