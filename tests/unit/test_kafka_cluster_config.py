"""What ``KafkaCluster`` writes for Kafka, without starting it.

The end-to-end proof is tests/broker/test_security_kafka.py: a PLAIN login whose
password holds a quote and a non-ASCII letter works only if ``server.properties``
carried it exactly, and a SCRAM login only if the salted password is Kafka's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster, ListenerSpec
from eos_kafka_source.apache_kafka.cluster import properties_line, scram_argument


def test_every_port_of_a_cluster_is_distinct(tmp_path: Path) -> None:
    """Regression: ports were picked one at a time, and the OS could hand out one port
    twice (Kafka's format then failed: "two listeners on the same port"; rare, so this
    checks the construction rather than forcing the collision)."""
    listeners = [ListenerSpec(f"L{i}", "PLAINTEXT") for i in range(6)]
    for _ in range(20):
        cluster = KafkaCluster(nodes=3, listeners=listeners, workdir=str(tmp_path))
        ports = [p for n in cluster.nodes
                 for p in (n.port, n.controller_port, *n.extra_ports.values())]
        assert len(ports) == 3 * 8 and len(set(ports)) == len(ports)


def test_properties_lines_survive_java_properties_load() -> None:
    """Regression: values were written raw, in UTF-8, and Kafka reads ISO-8859-1 with
    backslash escapes: a non-ASCII or backslashed password reached the broker changed."""
    assert properties_line("a.b", "plain") == "a.b=plain\n"
    assert properties_line("k", "Pw'x-\u00e9") == "k=Pw'x-\\u00e9\n"
    assert properties_line("k", "a\\b") == "k=a\\\\b\n"
    assert properties_line("k", "\U0001f511") == "k=\\ud83d\\udd11\n"
    assert properties_line("k", "line1\nline2") == "k=line1\\nline2\n"
    assert properties_line("k", " lead") == "k=\\ lead\n"
    assert properties_line("a:b=c", "v") == "a\\:b\\=c=v\n"
    assert properties_line("k", 'x="y";').isascii()


def test_scram_users_are_formatted_without_the_password() -> None:
    """StorageTool gets a salt and a salted password: the password is on no command line."""
    argument = scram_argument("SCRAM-SHA-512", "alice", "Pw'7f3KzQ9X-\u00e9")
    assert argument.startswith("SCRAM-SHA-512=[name=alice,salt=\"")
    assert "saltedpassword=\"" in argument and argument.endswith(",iterations=4096]")
    assert "7f3KzQ9X" not in argument


def test_cluster_ids_never_start_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """The storage tool reads ``-t -abc...`` as an option: such an id must be drawn again."""
    from eos_kafka_source.apache_kafka import cluster

    draws = iter([b"\xfb" + bytes(15), bytes(16)])  # base64 of the first starts with "-"
    monkeypatch.setattr(cluster.os, "urandom", lambda n: next(draws))
    cluster_id = cluster.new_cluster_id()
    assert len(cluster_id) == 22 and not cluster_id.startswith("-")
    assert cluster_id == "A" * 22
