"""JSON Schema cases against jsonschema, both directions.

Read: each value is framed as Confluent's JSON serializer frames it (compact JSON).
jsonschema judges it against the reader schema: a value that fits must read as the row it
maps to (integers, numbers as doubles, dates and date-times as days and microseconds,
absent properties null); one that does not must not read silently (an error on its row in
PERMISSIVE). Write: eoskafka encodes the rows it read; the JSON must fit the schema by
jsonschema and equal the value read (null properties written as absent).
"""

from __future__ import annotations

import json
import struct
from typing import Any

import jsonschema
import pyarrow as pa

from eos_kafka_source.formats import json_schema
from eos_kafka_source.formats.schemas import JSON, PERMISSIVE, RegisteredSchema
from tests.formats.explorer.arrow_compare import plain_rows
from tests.formats.explorer.cases import Case, Difference, OneSchema, write_back
from tests.formats.explorer.json_gen import days, micros
from tests.formats.explorer.values import INT64, first_difference

_HEADER = b"\x00" + struct.pack(">I", 1)


def _where(i: int) -> str:
    return f"row {i}"


class Unholdable(ValueError):
    """A value that fits the schema but not its column (an integer beyond int64)."""


def expect(node: dict[str, Any], value: Any) -> Any:
    """The row a value that fits ``node`` maps to (time types as their integers)."""
    if value is None:
        return None
    if "oneOf" in node:
        return expect(node["oneOf"][1], value)
    kind = node.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object" and "properties" in node:
        return {name: expect(sub, value.get(name)) for name, sub in node["properties"].items()}
    if kind == "object":
        return {k: expect(node["additionalProperties"], v) for k, v in value.items()}
    if kind == "array":
        return [expect(node["items"], v) for v in value]
    if kind == "number":
        return float(value)
    if kind == "integer":
        if not INT64[0] <= value <= INT64[1]:
            raise Unholdable(f"{value!r} is beyond int64")
        return int(value)
    if node.get("format") == "date":
        return days(value)
    if node.get("format") == "date-time":
        return micros(value)
    return value


def _nullable(node: Any) -> bool:
    kind = node.get("type")
    return (isinstance(kind, list) and "null" in kind) or any(
        o.get("type") == "null" for o in node.get("oneOf", ()))


def by_type(node: Any) -> Any:
    """The schema as a column's type judges values: a required property whose type allows
    null may be absent (it reads as null, which the column holds)."""
    if isinstance(node, list):
        return [by_type(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: by_type(v) for k, v in node.items()}
    if "required" in node and isinstance(node.get("properties"), dict):
        props = node["properties"]
        out["required"] = [r for r in node["required"] if r not in props
                           or not _nullable(props[r])]
    return out


def features(schema: dict[str, Any], values: list[Any]) -> set[str]:
    """What a difference may be about: why jsonschema refuses a value (``refused-type-
    integer``: a non-integer where the reader says integer; ``refused-required``: ...)."""
    validator = jsonschema.Draft7Validator(by_type(schema))
    found: set[str] = set()
    for v in values:
        if v is None:
            continue
        for error in validator.iter_errors(v):
            if error.validator == "type":
                want = error.validator_value
                want = "-".join(want) if isinstance(want, list) else want
                found.add(f"refused-type-{want}")
            else:
                found.add(f"refused-{error.validator}")
    return found


def check(cases: list[Case], spark: Any = None) -> tuple[list[Difference], int]:
    found: list[Difference] = []
    for case in cases:
        for name, detail in _one(case):
            found.append(Difference(case, name, detail, features(case.schema, case.values)))
    return found, 0


def _one(case: Case) -> list[tuple[str, str]]:
    registered = RegisteredSchema(1, JSON, json.dumps(case.schema))
    lookup = OneSchema(registered)
    framed = [None if v is None else _HEADER + json.dumps(v, ensure_ascii=False).encode()
              for v in case.values]
    try:
        decoder = json_schema.decoder(registered, lookup, mode=PERMISSIVE)
    except Exception as exc:  # noqa: BLE001 - every generated schema maps to a column
        return [("schema", f"eoskafka refuses the schema: {type(exc).__name__}: {exc}")]
    try:
        decoded = decoder.decode(pa.array(framed, pa.binary()), _where)
    except Exception as exc:  # noqa: BLE001
        return [("read", f"eoskafka's PERMISSIVE decode raised {type(exc).__name__}: {exc}")]
    errors = decoded.errors.to_pylist() if decoded.errors is not None else [None] * len(framed)
    rows = plain_rows(decoded.values)
    validator = jsonschema.Draft7Validator(by_type(case.schema),
                                           format_checker=jsonschema.FormatChecker())
    writes = jsonschema.Draft7Validator(case.schema, format_checker=jsonschema.FormatChecker())
    fits: list[bool] = []
    for i, value in enumerate(case.values):
        if value is None:
            fits.append(False)
            continue
        error = next(iter(validator.iter_errors(value)), None)
        why = None if error is None else f"{error.message} at {error.json_path}"
        if why is None:
            try:
                wanted = expect(case.schema, value)
            except Unholdable as exc:
                why = str(exc)
        fits.append(why is None)
        if why is not None and errors[i] is None:
            return [("read", f"row {i}: eoskafka reads a value the reader schema refuses "
                             f"({why}) as {rows[i]!r:.200}")]
        if why is None and errors[i] is not None:
            return [("read", f"row {i}: eoskafka refuses a value that fits the reader schema:"
                             f" {errors[i]}")]
        if why is None:
            diff = first_difference(rows[i], wanted, f"row {i}")
            if diff:
                return [("read", diff)]
    keep = [i for i, ok in enumerate(fits) if ok]
    if not keep:
        return []
    written, failed = write_back(json_schema.encoder(registered, lookup), decoded.values, keep)
    if failed:
        return [("write", failed)]
    for i, again in zip(keep, written, strict=True):
        if again is None or again[:5] != _HEADER:
            return [("write", f"row {i}: eoskafka's header {again!r:.40} is not {_HEADER!r}")]
        back = json.loads(again[5:])
        why = next(iter(writes.iter_errors(back)), None)
        if why is not None:
            return [("write", f"row {i}: jsonschema refuses what eoskafka wrote: "
                              f"{why.message} at {why.json_path}")]
        diff = first_difference(expect(case.schema, back), rows[i], f"row {i}")
        if diff:
            return [("write", f"row {i}: eoskafka's JSON reads back differently: {diff}")]
    return []
