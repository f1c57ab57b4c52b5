"""The driver's wires kept between micro-batches (eos_kafka_source/wire/kept.py)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.wire import fetch_metadata, kept
from eos_kafka_source.wire.kept import kept_wire
from tests.kafka_helpers import create_topic


@pytest.fixture
def config(bootstrap: str) -> Iterator[ClientConfig]:
    yield ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})
    kept.close_kept()


def _connections(wire: object) -> list[object]:
    client = wire._client  # type: ignore[attr-defined]
    return [c for c in client._manager._conns.values() if c.connected]


def test_a_clean_use_keeps_the_wire_and_its_connections(config: ClientConfig, bootstrap: str,
                                                        unique: str) -> None:
    create_topic(bootstrap, unique)
    with kept_wire(config) as first:
        fetch_metadata(first, [unique])
        sibling = first.sibling(1)
        fetch_metadata(sibling, [unique])
        opened = _connections(first) + _connections(sibling)
    with kept_wire(config) as second:
        assert second is first and second.sibling(1) is sibling
        assert _connections(second) + _connections(sibling) == opened  # nothing reconnected
        fetch_metadata(second, [unique])


def test_a_use_that_raised_closes_the_wire(config: ClientConfig, bootstrap: str,
                                           unique: str) -> None:
    create_topic(bootstrap, unique)
    with pytest.raises(RuntimeError), kept_wire(config) as first:
        fetch_metadata(first, [unique])
        raise RuntimeError("the hook failed")
    assert first._client is None  # closed
    with kept_wire(config) as second:
        assert second is not first
        fetch_metadata(second, [unique])


def test_a_wire_idle_too_long_is_replaced(config: ClientConfig, bootstrap: str, unique: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    create_topic(bootstrap, unique)
    with kept_wire(config) as first:
        fetch_metadata(first, [unique])
    monkeypatch.setattr(kept, "KEEP_S", 0.0)
    with kept_wire(config) as second:
        assert second is not first and first._client is None
        fetch_metadata(second, [unique])


def test_uses_at_the_same_time_get_their_own_wires(config: ClientConfig) -> None:
    inside = threading.Barrier(2, timeout=30)
    seen: list[object] = []

    def use() -> None:
        with kept_wire(config) as wire:
            seen.append(wire)
            inside.wait()

    with kept_wire(config):
        pass  # one idle wire: only one of the two may take it
    threads = [threading.Thread(target=use) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(seen) == 2 and seen[0] is not seen[1]


def test_a_connection_closed_while_kept_is_reopened_not_failed(
        config: ClientConfig, bootstrap: str, unique: str) -> None:
    """What a broker's connections.max.idle.ms (or a restart) does to a kept connection:
    the next use notices the closed socket and reconnects instead of failing."""
    create_topic(bootstrap, unique)
    with kept_wire(config) as first:
        fetch_metadata(first, [unique])
        dead = _connections(first)
    for conn in dead:
        conn.transport._sock.shutdown(socket.SHUT_RDWR)  # type: ignore[attr-defined]
    with kept_wire(config) as second:
        assert second is first
        assert fetch_metadata(second, [unique])[unique].partitions == [0]
