"""Avro schemas with a name twice where the specification allows it once (two fields of a
record, two symbols of an enum, two definitions of a named type) are refused where they
are given, naming what is doubled, as spark-avro refuses them."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from eos_kafka_source.errors import ConfigError
from eos_kafka_source.formats import avro, framing
from eos_kafka_source.formats.schemas import FAILFAST, PERMISSIVE
from tests.unit.avro_helpers import Lookup, where

#: The explorer's reader schema: the writer's record plus two fields named ``added3``.
EXPLORED_WRITER: dict[str, Any] = {"type": "record", "name": "R1", "fields": [{
    "name": "f2", "type": [
        {"type": "array", "items": {"type": "bytes", "logicalType": "decimal",
                                    "precision": 17, "scale": 5}},
        {"type": "int", "logicalType": "timestamp-millis"},
        {"type": "fixed", "name": "T4", "size": 12, "logicalType": "duration"},
        {"type": "long", "logicalType": "timestamp-millis"}]}]}
EXPLORED_READER: dict[str, Any] = {**EXPLORED_WRITER, "fields": [
    *EXPLORED_WRITER["fields"],
    {"name": "added3", "type": ["null", "int"], "default": None},
    {"name": "added3", "type": "boolean", "default": False}]}


def test_reader_schema_with_two_fields_of_one_name_is_refused_at_schema() -> None:
    """Before, eoskafka read it as a struct with two fields named added3."""
    lookup = Lookup()
    reg = lookup.add(EXPLORED_READER)
    with pytest.raises(ConfigError, match=r"record R1 has two fields named 'added3'.*rename"):
        avro.arrow_type(reg, lookup)
    with pytest.raises(ConfigError, match="two fields named 'added3'"):
        avro.decoder(reg, lookup, mode=FAILFAST)


def test_sink_schema_with_two_fields_of_one_name_is_refused() -> None:
    lookup = Lookup()
    reg = lookup.add(EXPLORED_READER)
    with pytest.raises(ConfigError, match=f"schema {reg.id}: record R1 has two fields"):
        avro.AvroEncoder(reg, lookup)


def test_the_same_field_name_in_two_records_is_fine() -> None:
    lookup = Lookup()
    inner = {"type": "record", "name": "In", "fields": [{"name": "a", "type": "int"}]}
    reg = lookup.add({"type": "record", "name": "Out", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": inner}]})
    assert avro.arrow_type(reg, lookup).names == ["a", "b"]


def test_nested_record_with_two_fields_of_one_name_is_named_by_its_full_name() -> None:
    lookup = Lookup()
    inner = {"type": "record", "name": "In", "namespace": "shop", "fields": [
        {"name": "a", "type": "int"}, {"name": "a", "type": "long"}]}
    reg = lookup.add({"type": "record", "name": "Out", "fields": [
        {"name": "items", "type": {"type": "array", "items": inner}}]})
    with pytest.raises(ConfigError, match="record shop.In has two fields named 'a'"):
        avro.arrow_type(reg, lookup)


def test_enum_with_a_symbol_twice_is_refused_at_schema() -> None:
    lookup = Lookup()
    reg = lookup.add({"type": "record", "name": "R", "fields": [
        {"name": "s", "type": {"type": "enum", "name": "S", "symbols": ["A", "B", "A"]}}]})
    with pytest.raises(ConfigError, match="enum S has the symbol 'A' twice"):
        avro.arrow_type(reg, lookup)


@pytest.mark.parametrize("second", [{"type": "fixed", "name": "F", "size": 3},
                                    {"type": "fixed", "name": "F", "size": 2},
                                    {"type": "enum", "name": "F", "symbols": ["X"]}])
def test_named_type_defined_twice_is_refused_at_schema(second: dict[str, Any]) -> None:
    """fastavro refuses a second definition even when it is the same ("redefined named
    type"), so it is refused where the schema is given, not when the first record reads."""
    lookup = Lookup()
    reg = lookup.add({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": {"type": "fixed", "name": "F", "size": 2}},
        {"name": "b", "type": second}]})
    with pytest.raises(ConfigError, match="defines the type F twice.*refer to it by name"):
        avro.arrow_type(reg, lookup)


def test_named_type_defined_once_and_referred_to_by_name_is_fine() -> None:
    lookup = Lookup()
    reg = lookup.add({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": {"type": "fixed", "name": "F", "size": 2}},
        {"name": "b", "type": "F"}]})
    assert avro.arrow_type(reg, lookup).names == ["a", "b"]


def test_rows_of_a_writer_schema_with_two_fields_of_one_name_fail_naming_it() -> None:
    """A writer schema arrives with its records: rows written with it are bad rows (null
    with the reason under PERMISSIVE), the reason naming the doubled field."""
    lookup = Lookup()
    reader = lookup.add({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}]})
    writer = lookup.add({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "a", "type": "int"}]})
    payload = framing.header(writer.id) + b"\x02\x04"
    decoded = avro.decoder(reader, lookup, mode=PERMISSIVE).decode(
        pa.array([payload], pa.binary()), where)
    assert decoded.values.to_pylist() == [None]
    assert decoded.errors is not None
    assert "two fields named 'a'" in decoded.errors.to_pylist()[0]
