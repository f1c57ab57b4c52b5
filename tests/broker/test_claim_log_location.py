"""The prefix claim says where its decision log is (invariant 15).

A decision log on a driver's local disk is lost with that host. A driver started on
another host, with the same checkpoint path and prefix, finds a fresh log there: before
the fix it started as if nothing had been decided, and a batch Spark replays (the old
driver died after the sink's commit, before Spark's commits/N) was committed again. The
claim (a group offset on the broker: every driver sees it) now records the log's location,
its host and its id; a driver that cannot see that log refuses by name.

The other host's driver is played by the claim it leaves: the metadata its claim_prefix
writes, with its host name. Tansu keeps no offset-commit metadata: Kafka only.
"""

from __future__ import annotations

import json
import shutil
import socket
from collections import Counter
from pathlib import Path

import pytest

from eos_kafka_source.errors import CheckpointElsewhereError
from eos_kafka_source.sink.driver.claims import claim_group
from eos_kafka_source.wire.groups import commit_offset, fetch_offset
from tests.kafka_helpers import create_topic
from tests.sink_harness import Harness, assert_once_on_kafka, vals
from tests.unit.test_batch_identity import write_offsets

pytestmark = pytest.mark.kafka_only


def _first_run(bootstrap: str, unique: str, ckpt: Path) -> tuple[Harness, Counter[bytes]]:
    """Query A's batch 0, committed through a decision log on this host's disk."""
    create_topic(bootstrap, unique, partitions=2)
    write_offsets(ckpt, 0, {"in": {"0": 20}})
    first = Harness(bootstrap, unique, unique, ckpt, claim=True, checkpoint=ckpt,
                    lineage="query-A")
    first.driver.prepare(new_run=True)
    first.driver.commit(0, [first.task(p, vals(f"b0t{p}", 10)) for p in range(2)], tasks=2)
    return first, Counter(vals("b0t0", 10) + vals("b0t1", 10))


def _claim(h: Harness) -> tuple[int, dict]:
    with h.wire() as wire:
        found = fetch_offset(wire, claim_group(h.ids.prefix), h.topic, 0)
    assert found is not None and found[1]
    return found[0], json.loads(found[1])


def _as_if_on(h: Harness, host: str) -> None:
    """The claim as the same driver on ``host`` would have written it."""
    token, held = _claim(h)
    with h.wire() as wire:
        commit_offset(wire, claim_group(h.ids.prefix), h.topic, 0, token,
                      json.dumps({**held, "h": host}, separators=(",", ":")))


def test_the_claim_names_its_log(bootstrap: str, unique: str, tmp_path: Path) -> None:
    h, _ = _first_run(bootstrap, unique, tmp_path / "ckpt")
    _, held = _claim(h)
    assert held["l"] == f"file://{tmp_path}/ckpt/eoskafka"
    assert held["h"] == socket.gethostname() and held["k"]


def test_a_driver_that_cannot_see_the_claimed_log_refuses(
        bootstrap: str, unique: str, tmp_path: Path) -> None:
    """Before the fix: the driver on the new host bound a fresh log, the replayed batch 0
    found no decision and was committed again (every row of batch 0 twice)."""
    ckpt = tmp_path / "ckpt"
    first, wrote = _first_run(bootstrap, unique, ckpt)
    _as_if_on(first, "host-a.example")  # query A's driver ran on host-a
    shutil.rmtree(ckpt / "eoskafka")  # this host's disk has no such log
    moved = Harness(bootstrap, unique, unique, ckpt, claim=True, checkpoint=ckpt,
                    lineage="query-A")  # Spark's checkpoint (shared) replays batch 0 here
    with pytest.raises(CheckpointElsewhereError) as refused:
        moved.driver.prepare(new_run=True)
    message = str(refused.value)
    for part in (f"file://{ckpt}/eoskafka", "host-a.example", socket.gethostname(),
                 claim_group(unique)):
        assert part in message, part
    assert_once_on_kafka(moved, wrote)


def test_a_reset_on_the_same_host_and_a_shared_log_still_go_on(
        bootstrap: str, unique: str, tmp_path: Path) -> None:
    """The same host after a reset (the log deleted with the checkpoint) takes the claim
    over, as before; another host that sees the same log (a shared mount) goes on."""
    ckpt = tmp_path / "ckpt"
    first, wrote = _first_run(bootstrap, unique, ckpt)
    _as_if_on(first, "host-a.example")
    shared = Harness(bootstrap, unique, unique, ckpt, claim=True, checkpoint=ckpt,
                     lineage="query-A")  # host-a's log, seen here: the same log id
    shared.driver.prepare(new_run=True)
    shared.driver.commit(0, [shared.task(p, vals(f"r{p}", 10)) for p in range(2)], tasks=2)
    _, held = _claim(first)
    assert held["h"] == socket.gethostname()  # the claim follows the driver
    shutil.rmtree(ckpt)  # the operator resets the query on this host
    write_offsets(ckpt, 0, {"in": {"0": 20}})
    reset = Harness(bootstrap, unique, unique, ckpt, claim=True, checkpoint=ckpt,
                    lineage="query-B")
    reset.driver.prepare(new_run=True)
    reset.driver.commit(0, [reset.task(p, vals(f"new{p}", 10)) for p in range(2)], tasks=2)
    assert_once_on_kafka(reset, wrote + Counter(vals("new0", 10) + vals("new1", 10)))
