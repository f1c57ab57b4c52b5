"""A decoder's writer schema, looked up by the id in a record's header.

One rule for every codec: a row whose writer schema the registry does not hold, or whose
writer schema does not load, is a row error (null with the reason in PERMISSIVE mode); a
registry that cannot answer (unreachable, a refused sign-in) fails the batch in any mode,
since every row would fail for a reason that is not theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..errors import EosKafkaError, SchemaNotFoundError, SchemaRegistryError
from .schemas import RegisteredSchema, SchemaLookup

T = TypeVar("T")


def writer_or_reason(lookup: SchemaLookup, schema_id: int,
                     load: Callable[[RegisteredSchema], T]) -> T | str:
    """``load`` applied to writer schema ``schema_id``, or (a string) why rows written with
    it cannot decode. A registry error other than "not found" is raised, also while
    ``load`` looks up the schema's references."""
    try:
        schema = lookup.by_id(schema_id)
    except SchemaNotFoundError as exc:
        return f"the registry has no schema id {schema_id} ({exc.message})"
    try:
        return load(schema)
    except SchemaNotFoundError as exc:  # a reference the registry does not hold
        why = exc.message
    except SchemaRegistryError:
        raise
    except EosKafkaError as exc:
        why = exc.message
    except Exception as exc:  # a schema the parser refuses, in its own words
        why = f"{type(exc).__name__}: {exc}"
    return f"writer schema id {schema_id} does not load: {why}"
