"""The fault kinds of a 3-node Apache Kafka cluster (``make chaos BROKER=kafka``).

Beside the broker-independent kinds of :mod:`tests.chaos.faults` (executor, driver,
query stop, zombie):

- ``coordinator_kill``: ``kill -9`` the node that is the transaction coordinator
  (FindCoordinator) of one of the sink's transactional ids, at a random moment or
  while the driver is held at a commit step (before/after its decision, between
  EndTxns, after the last EndTxn, after marking the decision done), then released:
  the driver's next request meets the dead coordinator. Down 1-6 s, restarted.
- ``leader_kill``: ``kill -9`` the leader of a partition of the input or the output
  (for the output: at a random moment or while a task is held between two Produce
  batches), down 0-5 s, restarted.
- ``rolling_restart``: every node in turn, SIGTERM (controlled shutdown) and start,
  the next only once every partition is fully replicated again.
- ``driver_timeout``: ``kill -9`` the driver right after it recorded a commit
  decision and keep it down past ``kafka.transaction.timeout.ms``: Kafka aborts the
  decided transactions; the restarted driver copies their records from the log in a
  recovery transaction (only records the log no longer holds are reported, with
  EOSKAFKA_TRANSACTION_LOST).

After a node restart the harness waits until every partition (the internal
``__transaction_state`` and ``__consumer_offsets`` too) has its full ISR before the
next fault: one fault at a time, as an operator would run a cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kafka.protocol.metadata import MetadataRequest

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.wire import KafkaWire, fetch_metadata, find_coordinator

from .faults import _ARM_TIMEOUT_S, _COMMIT_POINTS, Chaos

KAFKA_KINDS = ("executor_kill", "driver_kill", "query_stop", "zombie", "coordinator_kill",
               "leader_kill", "rolling_restart", "driver_timeout")
#: Share of each kind in a soak (every kind still comes at least once): the coordinator
#: kill is what a 3-node cluster adds, the slow kinds (a minute each) come less often.
WEIGHTS = {"coordinator_kill": 5.0, "leader_kill": 1.5, "driver_kill": 0.5,
           "rolling_restart": 0.5, "driver_timeout": 0.5}
#: Where a coordinator kill is aimed: each commit step (``commit.before_endtxn``: the
#: driver has just found the coordinator and is about to send it EndTxn) and a random
#: moment, in turn.
COORDINATOR_MOMENTS = (*_COMMIT_POINTS, "commit.before_endtxn", "random")
_REPLICATED_TIMEOUT_S = 180.0


def quotas(n: int, kinds: tuple[str, ...], weights: dict[str, float]) -> dict[str, int]:
    """How many faults of each kind among ``n``: one of each first (when ``n`` allows), the
    rest in proportion to the weights (largest remainders)."""
    base = {k: 0 for k in kinds}
    for k in kinds[:n]:
        base[k] = 1
    rest = n - sum(base.values())
    total = sum(weights.get(k, 1.0) for k in kinds)
    exact = {k: rest * weights.get(k, 1.0) / total for k in kinds}
    for k in kinds:
        base[k] += int(exact[k])
    left = n - sum(base.values())
    for k in sorted(kinds, key=lambda k: (int(exact[k]) - exact[k], kinds.index(k)))[:left]:
        base[k] += 1
    return base


def wire_for(bootstrap: str) -> KafkaWire:
    return KafkaWire(ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap}))


def under_replicated(wire: KafkaWire, replicas: int) -> list[str]:
    """Partitions (internal topics included) whose ISR is short of ``replicas`` or leaderless."""
    version = min(wire.version(MetadataRequest), 9)
    response = wire.request(wire.any_node(), MetadataRequest[version](
        topics=None, allow_auto_topic_creation=False), "Metadata (ISR)")
    out = []
    for topic in response.topics:
        for p in topic.partitions:
            if p.leader_id < 0 or len(p.isr_nodes) < replicas:
                out.append(f"{topic.name}-{p.partition_index} leader {p.leader_id} "
                           f"isr {sorted(p.isr_nodes)}")
    return out


class KafkaChaos(Chaos):
    """:class:`Chaos` on a :class:`KafkaCluster`: node-level faults aimed with FindCoordinator
    and Metadata, the driver kept down past the transaction timeout."""

    def __init__(self, *args: Any, transaction_timeout_ms: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kafka: KafkaCluster = self.broker  # type: ignore[assignment]
        self.timeout_ms = transaction_timeout_ms
        self._coordinator_kills = 0
        self._moments: list[str] = []

    # -- cluster helpers -------------------------------------------------------------------

    def _sink_ids(self) -> list[str]:
        ids, size = self._sink_pool()
        return ids.pool(size)

    def _with_wire(self, what: str, call: Any) -> Any:
        """``call(wire)`` on a fresh connection, retried while the cluster settles."""
        deadline = time.monotonic() + 60
        while True:
            try:
                with wire_for(self.kafka.bootstrap_servers) as w:
                    return call(w)
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what}: {exc}") from exc
                time.sleep(0.5)

    def _leader(self, topic: str, partition: int) -> int:
        def leader(w: KafkaWire) -> int:
            node = fetch_metadata(w, [topic])[topic].leaders[partition]
            if node < 0:
                raise RuntimeError(f"{topic}-{partition} has no leader")
            return node
        return int(self._with_wire(f"leader of {topic}-{partition}", leader))

    def wait_replicated(self) -> float:
        """Wait until every partition has its full ISR; the seconds it took."""
        started = time.monotonic()
        replicas = len(self.kafka.nodes)
        while True:
            short = self._with_wire("ISR", lambda w: under_replicated(w, replicas))
            if not short:
                return time.monotonic() - started
            if time.monotonic() - started > _REPLICATED_TIMEOUT_S:
                raise RuntimeError(f"partitions still under-replicated after "
                                   f"{_REPLICATED_TIMEOUT_S:.0f}s: {short[:10]}")
            self.pipeline.ensure_running()
            time.sleep(0.5)

    def _kill_held(self, aimed: str | None,
                   node_of: Callable[[], int]) -> tuple[int, bool | None]:
        """``kill -9`` the node ``node_of()`` names while the driver or a task is held at the
        fault point ``aimed`` (None: at once), then let it go. Returns the node and whether
        the hold landed (None when not aimed)."""
        base, landed = None, None
        if aimed is not None:
            base, _ = self._arm(aimed, "block")
            landed = self._wait_blocked(base) is not None
        try:
            node = node_of()
            self.kafka.stop_node(node, kill=True)
        finally:
            if base is not None:
                self._disarm(base)
        return node, landed

    def _bounce(self, node: int, down: float) -> float:
        """Node ``node`` (already killed) stays down ``down`` s, starts, catches up."""
        time.sleep(down)
        self.kafka.start_node(node)
        return self.wait_replicated()

    # -- kinds -----------------------------------------------------------------------------

    def coordinator_kill(self) -> None:
        turn = self._coordinator_kills % len(COORDINATOR_MOMENTS)
        if turn == 0:  # each moment once per round, in a seeded order
            self._moments = list(COORDINATOR_MOMENTS)
            self.rng.shuffle(self._moments)
        moment = self._moments[turn]
        self._coordinator_kills += 1
        aimed = None if moment == "random" else moment
        down = round(self.rng.uniform(1, 6), 2)
        tid = self.rng.choice(self._sink_ids())
        node, landed = self._kill_held(aimed, lambda: int(self._with_wire(
            f"coordinator of {tid}", lambda w: find_coordinator(w, tid))))
        where = f"the driver held at {aimed}" if landed else "a random moment"
        self.log.add("coordinator_kill", f"node {node}, transaction coordinator of sink id "
                     f"{tid}, SIGKILLed at {where}; down {down}s", aimed, landed)
        caught_up = self._bounce(node, down)
        self.log.records[-1]["recovered_s"] = round(caught_up, 1)

    def leader_kill(self) -> None:
        topic = self.rng.choice((self.cfg["input"], self.cfg["output"]))
        partitions = (self.cfg["input_partitions"] if topic == self.cfg["input"]
                      else self.cfg["output_partitions"])
        partition = self.rng.randrange(partitions)
        aimed = None
        if topic == self.cfg["output"] and self.rng.random() < 0.5:
            aimed = "write.after_batch"  # a task between two Produce batches
        down = round(self.rng.uniform(0, 5), 2)
        node, landed = self._kill_held(aimed, lambda: self._leader(topic, partition))
        where = "a task held between two Produce batches" if landed else "a random moment"
        self.log.add("leader_kill", f"node {node}, leader of {topic}-{partition}, SIGKILLed "
                     f"at {where}; down {down}s", aimed, landed)
        self._bounce(node, down)

    def rolling_restart(self) -> None:
        started = time.monotonic()
        for node in self.kafka.nodes:
            self.kafka.stop_node(node.node_id)  # SIGTERM: controlled shutdown
            self.kafka.start_node(node.node_id)
            self.wait_replicated()
        self.log.add("rolling_restart", f"nodes {[n.node_id for n in self.kafka.nodes]} "
                     "restarted in turn (controlled shutdown, next once fully replicated) in "
                     f"{time.monotonic() - started:.0f}s")

    def driver_timeout(self) -> None:
        aimed = "commit.after_decision"
        down = round(self.timeout_ms / 1000 * 1.5 + 5, 1)
        since, pid = self.pipeline.mark(), self.pipeline.pid
        base, flag = self._arm(aimed, "killgroup")
        exited = self.pipeline.wait_for(
            lambda e: e["event"] == "exited" and e["pid"] == pid, since, _ARM_TIMEOUT_S)
        self._disarm()
        landed = exited is not None and flag.exists()
        if not landed:
            self.pipeline.kill()
        where = "right after its commit decision" if landed else "a random moment"
        self.log.add("driver_timeout", f"driver {pid} SIGKILLed at {where}, kept down {down}s "
                     f"(kafka.transaction.timeout.ms {self.timeout_ms})", aimed, landed)
        time.sleep(down)
        self.pipeline.start()


def coordinator_kills_in_commit(faults: list[dict[str, Any]]) -> int:
    """Coordinator kills that landed while the driver was held at a commit step."""
    return sum(1 for f in faults if f["kind"] == "coordinator_kill"
               and str(f.get("aimed") or "").startswith("commit.") and f.get("landed"))
