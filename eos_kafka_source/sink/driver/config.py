"""What every role of the driver's protocol is handed: the pool's ids, whose decisions, and
how long an outcome is waited for. One object, shared: the commit learns the lineage from
its hand-offs where the driver could not read it, and tests shorten the deadline.
Runs on: the driver (planning, commit and abort workers).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..naming import TransactionalIdFactory

#: The batch id a batch write's decision is recorded under (its lineage is the write id).
BATCH_WRITE = 0

#: Past a transaction's own timeout, how long until its coordinator has surely aborted it:
#: the coordinator looks for timed-out transactions every
#: transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s by default).
TIMEOUT_CHECK_SLACK_S = 15.0


@dataclass
class DriverConfig:
    """The sink's driver-side settings (DriverProtocol's arguments, docs there)."""

    ids: TransactionalIdFactory
    owner: str
    checkpoint: str
    timeout_ms: int
    lineage: str | None
    claim_topic: str | None
    claim_from_handoffs: bool
    #: How long an unknown EndTxn outcome is retried: until the transaction's own timeout
    #: has surely passed (after that nothing will change it but us).
    commit_deadline_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.commit_deadline_s:
            self.commit_deadline_s = self.timeout_ms / 1000 + TIMEOUT_CHECK_SLACK_S
