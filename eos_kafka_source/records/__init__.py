"""Kafka record batches (magic v2), network-free: framing, decode to Arrow, encode.

Source readers split Fetch responses with :func:`iter_batches`, skip or resolve control
batches with :func:`control_is_commit`, and decode data batches into Arrow with
:class:`ColumnBuilder`. Sink writers build Produce payloads with :func:`encode_batch`.
Each codec step has a compiled path (aiokafka's extension) and a pure-Python one
(forced with ``EOSKAFKA_PURE_CODEC=1``) that produce the same results; the sink encodes
header-less records column-wise from Arrow (:mod:`.arrow_encode`), byte for byte the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eos_kafka_source.records.header import (
    BatchHeader,
    control_is_commit,
    iter_batches,
    last_offset,
)

if TYPE_CHECKING:
    from eos_kafka_source.records.decode import ColumnBuilder
    from eos_kafka_source.records.encode import encode_batch, encode_control_batch

#: Imported on first use: the codec (aiokafka's extension, pyarrow.compute) is not needed by
#: the driver's planning and commit workers (each new worker imports it again), which
#: only walk batch headers (PEP 562).
_LAZY = {"ColumnBuilder": "decode", "encode_batch": "encode", "encode_control_batch": "encode"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value

__all__ = [
    "BatchHeader",
    "ColumnBuilder",
    "control_is_commit",
    "encode_batch",
    "encode_control_batch",
    "iter_batches",
    "last_offset",
]
