"""A streaming query (availableNow), Kafka -> Spark -> Kafka through a Kerberos (GSSAPI)
listener, exactly once, signed in with a keytab from the query's options alone
(tests/kerberos_kafka.py).

Spark runs the source's planning and the sink's driver hooks in Python workers of its
own, and the tasks in others, so the keytab, the principal and krb5.conf must reach them
in the options. The query's krb5.conf is a copy at a path of its own, which only the
options name; while the query runs, the session's krb5.conf (which Spark's workers could
have inherited as ``KRB5_CONFIG`` from this process, where earlier Kerberos tests set it)
names a KDC that does not answer, so a worker that did not read the options could not
sign in.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.java_oracle import assert_java_agrees
from tests.kafka_helpers import create_topic, write_plain
from tests.kdc import free_port
from tests.kerberos_kafka import KerberosKafka
from tests.oracle import assert_no_open_transactions, await_markers, committed_view

pytestmark = [pytest.mark.spark, pytest.mark.kafka_only]


def test_streaming_query_exactly_once_signed_in_with_a_keytab(
        spark, kerberos_kafka: KerberosKafka, unique: str, tmp_path: Path) -> None:
    kdc = kerberos_kafka.kdc
    assert kdc is not None
    krb5_conf = tmp_path / "krb5.conf"
    shutil.copy(kdc.krb5_conf, krb5_conf)
    options = kerberos_kafka.options(**{"kafka.sasl.kerberos.krb5.conf": str(krb5_conf)})
    plain = kerberos_kafka.admin  # the oracle's way in (no sign-in)
    source, output = f"{unique}-in", f"{unique}-out"
    create_topic(plain, source, 2)
    create_topic(plain, output, 2)
    expected = [f"krb-{i}".encode() for i in range(200)]
    write_plain(plain, source, expected)
    df = (spark.readStream.format("eoskafka").options(**options).option("subscribe", source)
          .option("startingOffsets", "earliest").load().select("key", "value"))
    session_conf = kdc.krb5_conf.read_text()
    kdc.krb5_conf.write_text(kerberos_kafka.unreachable_krb5_conf(free_port()).read_text())
    try:
        query = (df.writeStream.format("eoskafka").options(**options).option("topic", output)
                 .option("checkpointLocation", str(tmp_path / "ckpt"))
                 .trigger(availableNow=True).start())
        finished = query.awaitTermination(300)
    finally:
        kdc.krb5_conf.write_text(session_conf)
    if not finished:
        query.stop()
    assert finished, "the availableNow query did not finish within 300 s"
    assert query.exception() is None, query.exception()
    await_markers(plain, output)
    view = committed_view(plain, output)
    assert Counter(v for p in view.values() for v in p.committed_values) == Counter(expected)
    assert assert_java_agrees(plain, output) == len(expected)
    assert_no_open_transactions(plain, output)
