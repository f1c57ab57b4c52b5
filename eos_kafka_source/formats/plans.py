"""What a read or a write of schema'd payloads carries from the driver to its tasks.

A plan is resolved once on the driver (:mod:`.resolve`) and pickled into every input
partition (reads) or with the writer (writes): the reader or writer schema by id and text,
never "latest" to be looked up again, so every task of a query decodes with the same
reader schema and encodes with the same registered id.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .extras import require
from .registry_config import RegistryConfig
from .schemas import Codec, PayloadDecoder, RegisteredSchema, SchemaLookup

if TYPE_CHECKING:
    from .registry import SchemaRegistry


def codec(module: str) -> Codec:
    """The format module (``avro``, ``protobuf``, ``json_schema``) as a :class:`Codec`; on
    the driver and in every task, so a missing package names the extra there."""
    require(module)
    mod: Any = importlib.import_module(f"{__package__}.{module}")
    return mod  # type: ignore[no-any-return]


def registry_client(config: RegistryConfig) -> SchemaRegistry:
    """The process's client for ``config``: its cache of schemas by id outlives a task, so
    a worker asks the registry once per writer id."""
    from .registry import registry_for

    return registry_for(config)


@dataclass(frozen=True)
class SideRead:
    """One side's reader schema and the Arrow type it decodes to."""

    side: str
    module: str
    reader: RegisteredSchema
    arrow_type: pa.DataType
    #: Protobuf: the reader message's name; None: the schema's first message.
    message: str | None = None

    def decoder(self, lookup: SchemaLookup, mode: str) -> PayloadDecoder:
        """This side's decoder (built on the executor, once per task)."""
        fmt: Any = codec(self.module)
        extra = {"message": self.message} if self.message is not None else {}
        return fmt.decoder(self.reader, lookup, mode=mode, **extra)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class ReadPlan:
    """A read's decoding, fixed when the query starts."""

    sides: tuple[SideRead, ...]
    registry: RegistryConfig
    mode: str
    include_schema_id: bool
    #: ``includeDeadLetter``: the ``deadLetter`` column (formats/dead_letter.py).
    include_dead_letter: bool = False

    def side(self, name: str) -> SideRead | None:
        return next((s for s in self.sides if s.side == name), None)


@dataclass(frozen=True)
class SideWrite:
    """One side's registered writer schema (its id goes in every payload's header)."""

    side: str
    module: str
    schema: RegisteredSchema


@dataclass(frozen=True)
class WritePlan:
    """A write's encoding, fixed when the writer is created on the driver."""

    sides: tuple[SideWrite, ...]
    registry: RegistryConfig
