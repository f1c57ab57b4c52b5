"""Kafka record batches (magic v2), network-free: framing, decode to Arrow, encode.

Source readers split Fetch responses with :func:`iter_batches`, skip or resolve control
batches with :func:`control_is_commit`, and decode data batches into Arrow with
:class:`ColumnBuilder`. Sink writers build Produce payloads with :func:`encode_batch`.
Each codec step has a compiled path (aiokafka's extension) and a pure-Python one
(forced with ``EOSKAFKA_PURE_CODEC=1``) that produce the same results; the sink encodes
header-less records column-wise from Arrow (:mod:`.arrow_encode`), byte for byte the same.
"""

from eos_kafka_source.records.decode import ColumnBuilder
from eos_kafka_source.records.encode import encode_batch, encode_control_batch
from eos_kafka_source.records.header import BatchHeader, control_is_commit, iter_batches

__all__ = [
    "BatchHeader",
    "ColumnBuilder",
    "control_is_commit",
    "encode_batch",
    "encode_control_batch",
    "iter_batches",
]
