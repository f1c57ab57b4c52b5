"""A streaming query, Kafka -> Spark -> Kafka through an OAUTHBEARER listener, exactly once
while its tokens expire and are refreshed several times (tests/oauth_kafka.py).

Tokens live APP_TOKEN_S (6 s) and the query runs for several of those, so the driver and
Spark's reused Python workers each refresh their cached token more than once, and their
kept connections outlive the tokens they signed in with. On ``REAUTH`` the broker also
forces every open connection to re-authenticate every 3 s (KIP-368); there, a connection
that failed to would be closed by the broker and fail the query.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from tests.java_oracle import assert_java_agrees
from tests.kafka_helpers import create_topic, write_plain
from tests.oauth_kafka import APP, APP_TOKEN_S, OAuthKafka
from tests.oracle import assert_no_open_transactions, await_markers, committed_view
from tests.spark.test_source_stream import process_all

pytestmark = [pytest.mark.spark, pytest.mark.kafka_only]


def _committed(bootstrap: str, topic: str) -> Counter[bytes]:
    await_markers(bootstrap, topic)
    view = committed_view(bootstrap, topic)
    return Counter(v for p in view.values() for v in p.committed_values)


@pytest.mark.parametrize("listener", ["OAUTH", "REAUTH"])
def test_streaming_query_exactly_once_while_tokens_expire(
        spark, oauth_kafka: OAuthKafka, unique: str, tmp_path: Path, listener: str) -> None:
    options = oauth_kafka.options(listener)
    plain = oauth_kafka.cluster.bootstrap_servers  # the oracle's way in (no sign-in)
    source, output = f"{unique}-in", f"{unique}-out"
    create_topic(plain, source, 2)
    create_topic(plain, output, 2)
    df = (spark.readStream.format("eoskafka").options(**options).option("subscribe", source)
          .option("startingOffsets", "earliest").load().select("key", "value"))
    query = (df.writeStream.format("eoskafka").options(**options).option("topic", output)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(processingTime="1 second").start())
    issued_before = oauth_kafka.oidc.issued[APP]
    expected: list[bytes] = []
    ends = time.monotonic() + 3.5 * APP_TOKEN_S  # every token of the query expires 3 times
    rounds = 0
    try:
        while time.monotonic() < ends or rounds < 4:
            values = [f"{listener}-{rounds}-{i}".encode() for i in range(100)]
            write_plain(plain, source, values)
            expected += values
            process_all(query, 180)  # the round is through the query: then time passes
            rounds += 1
            time.sleep(0.5 * APP_TOKEN_S)
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    assert oauth_kafka.oidc.issued[APP] - issued_before >= 3, "tokens were refreshed"
    assert _committed(plain, output) == Counter(expected)
    assert assert_java_agrees(plain, output) == len(expected)
    assert_no_open_transactions(plain, output)
