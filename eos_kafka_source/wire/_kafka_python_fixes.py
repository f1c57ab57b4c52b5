"""One fix to kafka-python's internals, pinned to the versions pyproject allows (3.0.x).

``KafkaTCPTransport._read_from_sock`` (kafka-python 3.0.12) reads everything the
socket holds and, when the read ends in end-of-file, aborts the connection without
handing the bytes read before it to the protocol. Apache Kafka answers a refused
``SaslAuthenticate`` (wrong password) or ``SaslHandshake`` (mechanism not enabled)
and closes the connection at once, so the answer and the end-of-file arrive
together: the answer was lost, and every refusal read "socket disconnected" instead
of Kafka's "Authentication failed: Invalid username or password" or
UNSUPPORTED_SASL_MECHANISM.

:func:`install` replaces that one method with a copy that hands the bytes on first
and closes the connection on the next turn of kafka-python's loop, so the task
waiting for the answer (queued when the answer resolved its future) sees it first.
It installs only over the exact method it was written against (the hash of its
source below); tests/unit/test_kafka_python_fixes.py fails when kafka-python changes it.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import time
from typing import Any

import kafka.errors as kerrors
from kafka.net.transport import KafkaTCPTransport

log = logging.getLogger(__name__)

#: sha256 (prefix) of the source of kafka-python 3.0.12's ``_read_from_sock``.
EXPECTED = "572fe643c70751bf"
_ORIGINAL = KafkaTCPTransport._read_from_sock


def fingerprint(function: Any) -> str:
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):  # no source shipped: treat as changed
        return ""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


async def _read_from_sock(self: Any) -> None:
    """kafka-python's reader, except that bytes read before end-of-file are delivered."""
    while self._read and not self._closed:
        await self._net.wait_read(self._sock)
        data, err = self._sock_recv()
        if data:
            log.debug("%s: received %d bytes", self, len(data))
            self.last_read = time.monotonic()
            if self._protocol and self._protocol._sensors:
                self._protocol._sensors.bytes_received.record(len(data))
            try:
                self._protocol.data_received(data)
            except kerrors.KafkaProtocolError as e:
                return self.abort(error=e)
        if err:
            if not data:
                return self.abort(error=err)

            async def abort_later(transport: Any = self, error: Exception = err) -> None:
                transport.abort(error=error)

            self._read = False
            self._net.call_soon(abort_later)
            return None
    return None


def installed() -> bool:
    return KafkaTCPTransport._read_from_sock is _read_from_sock


def install() -> bool:
    """Put the fixed reader in place if kafka-python's is the one it was written for."""
    if installed():
        return True
    if fingerprint(_ORIGINAL) != EXPECTED:
        log.debug("kafka-python's transport reader changed; its fix is not installed")
        return False
    KafkaTCPTransport._read_from_sock = _read_from_sock  # type: ignore[method-assign]
    return True
