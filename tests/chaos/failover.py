"""The failover check (``make failover``): kills aimed at every commit step.

On a 3-node Apache Kafka (``min.insync.replicas=2``), each step of the driver's commit
(before and after its decision, before the EndTxn round, once its EndTxns are answered,
before and after marking the decision done) is met once by a ``kill -9``: of the transaction
coordinator of one of the sink's ids, or of the leader of an output partition (whose
markers and confirming reads the commit needs), in turn. Then the driver itself is
SIGKILLed and restarted to drain on Trigger.AvailableNow. The verdict is the chaos
round's (every input record once in the output, nothing open, Kafka's Java read_committed
consumer agrees), plus: no query run failed (Spark's own connector has none under these
faults; a coordinator killed while the next batch started was one).
"""

from __future__ import annotations

from typing import Any

from eos_kafka_source.wire import find_coordinator

from .faults import _COMMIT_POINTS
from .kafka_faults import KafkaChaos

#: Each commit step once (``commit.before_endtxn``: the driver has found the coordinator and
#: is about to send EndTxn), in the protocol's order.
MOMENTS = ("commit.before_decision", "commit.after_decision", "commit.before_endtxn",
           *(p for p in _COMMIT_POINTS if p not in ("commit.before_decision",
                                                    "commit.after_decision")))
#: One failover kill per moment.
FAULTS = len(MOMENTS)
KIND = "failover_kill"


class FailoverChaos(KafkaChaos):
    """:class:`KafkaChaos` whose one kind walks :data:`MOMENTS`, the coordinator and an
    output leader taking turns as the victim."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._turn = 0

    def failover_kill(self) -> None:
        moment = MOMENTS[self._turn % len(MOMENTS)]
        coordinator = self._turn % 2 == 0
        self._turn += 1
        down = round(self.rng.uniform(1, 3), 2)
        if coordinator:
            tid = self.rng.choice(self._sink_ids())
            node, landed = self._kill_held(moment, lambda: int(self._with_wire(
                f"coordinator of {tid}", lambda w: find_coordinator(w, tid))))
            what = f"transaction coordinator of sink id {tid}"
        else:
            partition = self.rng.randrange(self.cfg["output_partitions"])
            node, landed = self._kill_held(
                moment, lambda: self._leader(self.cfg["output"], partition))
            what = f"leader of {self.cfg['output']}-{partition}"
        where = f"the driver held at {moment}" if landed else "a random moment"
        self.log.add("coordinator_kill" if coordinator else "leader_kill",
                     f"node {node}, {what}, SIGKILLed at {where}; down {down}s", moment, landed)
        self.log.records[-1]["recovered_s"] = round(self._bounce(node, down), 1)

