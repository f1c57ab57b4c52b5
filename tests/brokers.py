"""Which broker this test session runs against, and marks that depend on it.

``EOSKAFKA_TEST_BROKER`` picks it: ``tansu`` (default: the embedded pip-only broker),
``kafka`` (Apache Kafka 4.4.x, one node: the reference), ``kafka43`` (Apache Kafka
4.3.x) or ``kafka39`` (Apache Kafka 3.9.x, the classic transaction protocol). Tests
marked ``tansu_only`` or ``kafka_only`` are deselected (not skipped) on the other kind;
``on_tansu_xfail`` marks a case that Tansu cannot do: a strict xfail there, a plain test
on Kafka.
"""

from __future__ import annotations

import os

import pytest

BROKER_KIND = os.environ.get("EOSKAFKA_TEST_BROKER", "tansu")
KINDS = {"tansu": None, "kafka": "4.4", "kafka43": "4.3", "kafka39": "3.9"}
if BROKER_KIND not in KINDS:
    raise SystemExit(f"EOSKAFKA_TEST_BROKER={BROKER_KIND!r}: use one of {', '.join(KINDS)}")

ON_TANSU = BROKER_KIND == "tansu"
ON_KAFKA = not ON_TANSU
KAFKA_VERSION = KINDS[BROKER_KIND]


def on_tansu_xfail(reason: str, **kwargs: object) -> pytest.MarkDecorator:
    """Strict xfail on Tansu (``reason`` says what it lacks); must pass on Apache Kafka."""
    return pytest.mark.xfail(ON_TANSU, reason=reason, strict=True, **kwargs)
