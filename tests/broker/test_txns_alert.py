"""``eoskafka txns`` as an alert a team can page on, beside a healthy query on Apache Kafka.

Run every 5 minutes as docs/operations.md recommends, it paged on a healthy query: a batch
decided after the decision log's listing was read (its age unknown, counted as stale), and a
commit whose markers were still being written (judged hanging, with advice to abort a
committed transaction). Here a driver commits batch after batch without pause while the
check runs about once a second (``--max-open-age 60``): every run must exit 0. The check
beside a truly hanging transaction (one alarm, Kafka's command that ends it, which does) is
tests/broker/test_hanging_txns.py.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from eos_kafka_source.cli import main
from tests.kafka_helpers import create_topic
from tests.sink_harness import Harness, vals

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]

CHECKS = 30


def test_no_alarm_beside_a_healthy_query(bootstrap: str, unique: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    create_topic(bootstrap, unique, partitions=4)
    sink = Harness(bootstrap, unique, unique, tmp_path / "ckpt")
    sink.driver.prepare(new_run=True)
    stop = threading.Event()
    committed: list[int] = []
    errors: list[BaseException] = []

    def query() -> None:
        batch = 0
        try:
            while not stop.is_set():
                sink.driver.prepare(new_run=False)
                sink.driver.commit(batch, [sink.task(p, vals(f"b{batch}t{p}", 20))
                                           for p in range(4)], tasks=4)
                committed.append(batch)
                batch += 1
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    running = threading.Thread(target=query, daemon=True)
    running.start()
    alarms: list[dict] = []
    try:
        for _ in range(CHECKS):
            code = main(["txns", "--checkpoint", str(tmp_path / "ckpt"), "-b", bootstrap,
                         "--topic", unique, "--max-open-age", "60", "--json"])
            doc = json.loads(capsys.readouterr().out)
            if code != 0:
                alarms.append(doc)
            time.sleep(1.0)  # the check's period (as a cron job's), not a synchronisation
    finally:
        stop.set()
        running.join(120)
    assert not errors, errors
    assert len(committed) >= 5, "the query committed too few batches to tell"
    assert alarms == [], json.dumps(alarms[0], indent=1)[:3000]
