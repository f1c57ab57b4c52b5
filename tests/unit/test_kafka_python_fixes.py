"""The kafka-python fix is in place: fails when kafka-python changes the method it replaces.

What it fixes is shown on Apache Kafka by tests/broker/test_security_kafka.py (a refused
login reports Kafka's reason, an unsupported mechanism says so).
"""

from __future__ import annotations

from kafka.net.transport import KafkaSSLTransport, KafkaTCPTransport

import eos_kafka_source.wire  # noqa: F401 (installs the fix)
from eos_kafka_source.wire import _kafka_python_fixes as fixes


def test_the_reader_fix_is_installed_over_the_reader_it_was_written_for() -> None:
    assert fixes.fingerprint(fixes._ORIGINAL) == fixes.EXPECTED, (
        "kafka-python changed KafkaTCPTransport._read_from_sock: check whether it now hands "
        "on the bytes read before end-of-file, then drop or update the fix")
    assert fixes.installed() and fixes.install()
    assert KafkaSSLTransport._read_from_sock is KafkaTCPTransport._read_from_sock
