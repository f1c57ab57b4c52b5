"""Secrets are masked in log records and messages, in every spelling a log line uses."""

from __future__ import annotations

import logging

import pytest

from eos_kafka_source.wire.redact import MASK, protect, redact

SECRET = "Un1t'k\\ey-\u00e9-Zw8Q"
CORE = "Zw8Q"


def test_every_spelling_is_masked(caplog: pytest.LogCaptureFixture) -> None:
    ours = logging.getLogger("eos_kafka_source.test")
    protect([SECRET, None, ""])
    caplog.set_level(logging.DEBUG)
    plain = b"\x00alice\x00" + SECRET.encode()
    log = logging.getLogger("kafka.protocol.parser")  # where kafka-python logs request bytes
    log.debug("Send: %r", bytearray(plain))
    log.debug("auth_bytes=%r", plain)
    log.debug("user=%s password=%s", "alice", SECRET)
    log.debug("repr %r", {"password": SECRET})
    try:
        raise ValueError(f"bad {SECRET}")
    except ValueError:
        ours.debug("failed", exc_info=True)
    assert len(caplog.records) == 5
    assert CORE not in caplog.text
    assert all(MASK in r.getMessage() or r.exc_text for r in caplog.records)


def test_loggers_created_later_are_covered_at_the_next_protect(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    late = logging.getLogger("kafka.some.module.imported.later")
    protect([])  # what every new connection does
    late.info("token %s", SECRET)
    assert CORE not in caplog.text


def test_redact_text() -> None:
    protect([SECRET])
    assert redact(f"x {SECRET} y") == f"x {MASK} y"
    assert CORE not in redact(repr(SECRET.encode()))
    assert redact("nothing secret") == "nothing secret"
