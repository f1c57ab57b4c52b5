"""Invariant 7: two queries never share a transactional-id prefix.

Every prefix a streaming sink uses, derived or chosen, is claimed on the broker: group
``<prefix>.eoskafka-claim`` commits, on partition 0 of the sink topic (with a ``topic``
column: the first topic the first commit wrote, :func:`claim_at_first_commit`), an offset that
fingerprints the owning checkpoint (the offset itself: Tansu drops offset metadata) and
metadata naming the owning query id and the ids it replaced. A query at another
checkpoint is refused. A new query id at the same checkpoint is a reset checkpoint and
takes the claim over; the query it replaced is then refused, so two deployments with the
same checkpoint path (prod and DR, ``/tmp/ckpt`` on two clusters) stop loudly instead of
fencing each other's transactions back and forth.

Batch writes mark an aborted write per write id (``<prefix>.eoskafka-aborted.<write id>``):
a late task of that write finds it and writes nothing; later writes with the same prefix
are not affected. A batch write without a decision log marks the same group "committing"
(another offset) before its first EndTxn, so its abort never aborts a transaction whose
commit may have reached Kafka. A streaming query marks its aborted batch the same way, per query id
(``<prefix>.eoskafka-aborted.<query id>``, the batch id + 1 as the offset): a task of that
batch that initialises its id after the abort's fencing would otherwise hold a transaction
open until the query starts again or the transaction times out (a query stopped for good
has neither). The abort records the query id in the decision log's pool state first; the
restart clears the marks of every query id recorded there (and its own) after its fencing,
before its tasks replay the batch, even where it cannot read its query id.

Both groups start with the prefix, so one prefixed GROUP ACL on it covers them, as one
prefixed TRANSACTIONAL_ID ACL covers the ids (invariant 11, docs/acls.md). Kafka
authorises an offset commit with READ on its topic too: the sink needs READ on its
output topic for the claim (and for reading a transaction's outcome, invariant 9).
Before 2026-11-25 the claim group was ``eoskafka-claim.<prefix>``: a query finding no
claim reads that one too, where it may, and carries a claim it finds over.
Runs on: the driver's planning worker (claims, marks), executors (checking a mark).
"""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Sequence

from ...acls import ABORTED_INFIX, CLAIM_SUFFIX
from ...errors import CheckpointElsewhereError, IdPrefixClashError, NotAuthorizedError
from ...faults import fault_point
from ...wire import KafkaWire
from ...wire.groups import commit_offset, fetch_offset, fetch_offset_at
from ...wire.retry import GROUP
from ..decisions.log import DecisionLog
from ..handoff import TxnHandoff
from ..lineage import pyarrow_uri

_KEEP_REPLACED = 10  # replaced query ids remembered in the claim (metadata stays small)


def claim_prefix(wire: KafkaWire, prefix: str, owner: str, topic: str, *,
                 lineage: str | None = None, log: DecisionLog | None = None) -> None:
    """Register checkpoint ``owner`` (and query ``lineage``, decision ``log``) for
    ``prefix``, or raise."""
    group = held_by = claim_group(prefix)
    current = _fetch_kept(wire, group, topic)  # before every batch: one OffsetFetch
    token = _token(owner)
    where = _log_place(log)
    if current is None:
        current = _legacy_claim(wire, prefix, topic)
        held_by = _legacy_group(prefix)
        if current is None:
            commit_offset(wire, group, topic, 0, token, _metadata(owner, lineage, [], where))
            return
        if current[0] == token:  # our own claim under its old name: carry it over
            commit_offset(wire, group, topic, 0, token, current[1] or owner)
    offset, metadata = current
    held = _parse(metadata)
    if offset != token:
        holder = held.get("c") or metadata or f"#{offset}"
        raise IdPrefixClashError(
            f"transactionalIdPrefix {prefix!r} is already used by another query (checkpoint "
            f"fingerprint {holder}, this query is {owner}); two queries sharing transactional "
            "ids would fence and abort each other's transactions. Give each query its own "
            f"prefix, or, if the other query is gone for good, delete consumer group {held_by!r}"
        )
    _refuse_unseen_log(held, where, prefix, group)
    holder_query = held.get("q")
    if not lineage or not holder_query or holder_query == lineage:
        if where and holder_query and any(held.get(k) != v for k, v in where.items()):
            # The same query's log, seen from another host or place: the claim follows it.
            commit_offset(wire, group, topic, 0, token,
                          _metadata(owner, holder_query, list(held.get("r", ())), where))
        return  # the same query (or a broker that keeps no metadata: Tansu)
    replaced = list(held.get("r", ()))
    if lineage in replaced:
        raise IdPrefixClashError(
            f"transactionalIdPrefix {prefix!r} was taken over by query {holder_query} at the "
            f"same checkpoint path (this query is {lineage}): the checkpoint was reset, or "
            "two deployments (say prod and DR) use the same checkpoint path and prefix. "
            "This query stops so they cannot fence each other; give each deployment its own "
            "checkpointLocation or transactionalIdPrefix.")
    commit_offset(wire, group, topic, 0, token,
                  _metadata(owner, lineage, [*replaced, holder_query][-_KEEP_REPLACED:], where))


def _fetch_kept(wire: KafkaWire, group: str, topic: str) -> tuple[int, str | None] | None:
    """:func:`fetch_offset` at the group coordinator this worker found before
    (wire/known.py)."""
    found, _ = fetch_offset_at(wire, group, topic, 0,
                               node=wire.known_coordinator(group, GROUP))
    return found


def claim_at_first_commit(wire: KafkaWire, decisions: DecisionLog, prefix: str, owner: str,
                          handoffs: Sequence[TxnHandoff], *, lineage: str | None) -> None:
    """A sink writing a ``topic`` column (no ``topic`` option) claims its prefix at its first
    commit, before the decision, on the first topic (sorted) the hand-offs wrote: Kafka
    refuses an offset commit on an unknown topic, and none is known sooner. The topic is
    kept in the pool state; later batches and runs claim on it
    before any task starts (DriverProtocol.prepare)."""
    pool = decisions.pool()
    topics = sorted({t for h in handoffs for t, _, _ in h.partitions})
    if pool.claim_topic or not topics:
        return
    claim_prefix(wire, prefix, owner, topics[0], lineage=lineage, log=decisions)
    fault_point("commit.after_claim")  # claimed, not yet remembered: the next commit claims
    pool.claim_topic = topics[0]
    decisions.save_pool(pool)


def claim_group(prefix: str) -> str:
    return f"{prefix}{CLAIM_SUFFIX}"


def _legacy_group(prefix: str) -> str:
    return f"eoskafka-claim.{prefix}"


def _legacy_claim(wire: KafkaWire, prefix: str, topic: str) -> tuple[int, str | None] | None:
    """The claim under its name before 2026-11-25 (``eoskafka-claim.<prefix>``), if this
    principal may read it: a least-privilege one never could have written it."""
    try:
        return fetch_offset(wire, _legacy_group(prefix), topic, 0)
    except NotAuthorizedError:
        return None


def _metadata(owner: str, lineage: str | None, replaced: list[str],
              where: dict[str, str] | None = None) -> str:
    if not lineage:
        return owner
    return json.dumps({"c": owner, "q": lineage, "r": replaced, **(where or {})},
                      separators=(",", ":"))


def _log_place(log: DecisionLog | None) -> dict[str, str]:
    """Where the decision log is, for the claim: its URI; for a log on local disk, the host
    and the log's id too (another host's driver cannot see it: invariant 15)."""
    if log is None:
        return {}
    if not log.local:
        return {"l": pyarrow_uri(log.location)}
    log_id = log.log_id()
    return {"l": pyarrow_uri(log.location), "h": socket.gethostname(),
            **({"k": log_id} if log_id else {})}


def _refuse_unseen_log(held: dict, where: dict[str, str], prefix: str, group: str) -> None:
    """A claim whose decision log is on another host's local disk, while the log here is
    another one (or none): starting fresh would commit every replayed batch again."""
    theirs, mine = held.get("h"), where.get("h")
    if not (theirs and mine and held.get("k") and where.get("k")):
        return  # a shared store, a claim or a log from before logs were named, no log id
    if theirs == mine or held["k"] == where["k"]:
        return  # the same host (a reset deletes the log), or the same log seen from here
    raise CheckpointElsewhereError(
        f"transactionalIdPrefix {prefix!r} is claimed by query {held.get('q', 'unknown')}, "
        f"whose decision log is {held.get('l')} on the local disk of host {theirs}; this "
        f"driver runs on {mine} and finds another log at {where.get('l')} (a new one, or "
        "none). Starting fresh would commit again every batch Spark replays (duplicates). "
        "Run the driver where that log is, or keep the checkpoint (or decisionLogLocation) "
        "on storage every driver host sees (hdfs://, s3://, ...); if that query is gone "
        f"for good and none of its batches is undone, delete consumer group {group!r}.")


def _parse(metadata: str | None) -> dict:
    if not metadata or not metadata.startswith("{"):
        return {"c": metadata} if metadata else {}
    try:
        return json.loads(metadata)
    except ValueError:
        return {}


def _token(owner: str) -> int:
    """The owner's fingerprint as a non-negative int64 (what an offset can hold)."""
    return int(hashlib.sha256(owner.encode()).hexdigest()[:15], 16)


def aborted_group(prefix: str, write_id: str) -> str:
    """The group a batch write's or a streaming query's abort mark is committed in."""
    return f"{prefix}{ABORTED_INFIX}{write_id}"


#: The offsets a batch write's mark holds (Tansu drops metadata): aborted, or committing.
_WRITE_ABORTED, _WRITE_COMMITTING = 1, 2


def mark_write_aborted(wire: KafkaWire, prefix: str, topic: str, write_id: str) -> None:
    """Record on the broker that batch write ``write_id`` (using ``prefix``) was aborted.

    Written before the driver fences the write's ids: a task that initialises its
    id after that fence then finds the mark and aborts its own transaction, so a
    task Spark launched just before the job failed cannot leave one open.
    """
    commit_offset(wire, aborted_group(prefix, write_id), topic, 0, _WRITE_ABORTED, "aborted")


def mark_write_committing(wire: KafkaWire, prefix: str, topic: str, write_id: str) -> None:
    """Record that batch write ``write_id`` (without a decision log) is about to send its
    first EndTxn commit: from here on an abort must not abort its transactions (an EndTxn
    may have reached Kafka). A late task finds this mark too and writes nothing."""
    commit_offset(wire, aborted_group(prefix, write_id), topic, 0, _WRITE_COMMITTING,
                  "committing")


def write_aborted(wire: KafkaWire, prefix: str, topic: str, write_id: str, *,
                  node: int | None = None) -> tuple[bool, int]:
    """Whether a task of batch write ``write_id`` must not write (aborted, or committing),
    and the group's coordinator (asked first when ``node`` is given: a task's worker keeps
    it for its next task, ``wire/known.py``)."""
    found, where = fetch_offset_at(wire, aborted_group(prefix, write_id), topic, 0, node=node)
    return found is not None, where


def write_committing(wire: KafkaWire, prefix: str, topic: str, write_id: str) -> bool:
    """Whether batch write ``write_id`` started committing (:func:`mark_write_committing`)."""
    found = fetch_offset(wire, aborted_group(prefix, write_id), topic, 0)
    return found is not None and found[0] == _WRITE_COMMITTING


def mark_batch_aborted(wire: KafkaWire, prefix: str, topic: str, lineage: str,
                       batch_id: int) -> None:
    """Record that streaming batch ``batch_id`` of query ``lineage`` was aborted.

    Written before the driver fences the pool, as for batch writes: a task of the batch that
    initialises its id after the fence finds the mark and aborts its own transaction. The
    offset says which batch (``batch_id + 1``; 0 once cleared): Tansu drops the metadata.
    """
    commit_offset(wire, aborted_group(prefix, lineage), topic, 0, batch_id + 1,
                  json.dumps({"batch": batch_id}))


def batch_aborted(wire: KafkaWire, prefix: str, topic: str, lineage: str,
                  batch_id: int) -> bool:
    """Whether the driver aborted streaming batch ``batch_id`` of query ``lineage``."""
    return batch_aborted_at(wire, prefix, topic, lineage, batch_id)[0]


def batch_aborted_at(wire: KafkaWire, prefix: str, topic: str, lineage: str, batch_id: int,
                     *, node: int | None = None) -> tuple[bool, int]:
    """:func:`batch_aborted`, asking ``node`` first (the group's coordinator an earlier task
    of this worker found: ``wire/known.py``; one that moved answers NOT_COORDINATOR and is
    looked up again); returns the answer and the coordinator that gave it. One OffsetFetch
    on a kept connection when ``node`` is right."""
    found, where = fetch_offset_at(wire, aborted_group(prefix, lineage), topic, 0, node=node)
    return found is not None and found[0] == batch_id + 1, where


def clear_batch_aborted(wire: KafkaWire, prefix: str, topic: str, lineage: str) -> None:
    """A new run of query ``lineage`` replays its aborted batch: let its tasks write.

    Called after the run's fencing at start, which ended every earlier task's transaction.
    """
    group = aborted_group(prefix, lineage)
    found = fetch_offset(wire, group, topic, 0)
    if found is not None and found[0] > 0:
        commit_offset(wire, group, topic, 0, 0, json.dumps({"cleared": found[0] - 1}))
