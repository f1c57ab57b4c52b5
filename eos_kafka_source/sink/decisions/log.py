"""The durable decision log beside the query's checkpoint (or at ``decisionLogLocation``).

Committing N Kafka transactions is not atomic, so the driver records its decision (batch
id + every hand-off) here before the first EndTxn and marks it done after the last; a
restarted driver rolls a decided-but-unfinished batch forward. Lives at
``<location>/eoskafka`` through pyarrow's filesystems, so HDFS, S3, GCS and ABFS work as
local directories do. What each decision file means: :mod:`.states`.

Layout: ``decisions/<lineage>/<batch>.{json,done,recovery}`` (one directory per query
lineage or batch write; files of logs written before lineages existed sit directly in
``decisions/`` and belong to the lineage that first opened the log, ``lineage.json``'s
``legacy``); ``lineage.json`` which streaming query the log serves and which it replaced
after checkpoint resets; ``pool.json`` the transactional-id pool and the epochs the
driver fenced ids to; ``planned.json`` when the last batch was prepared (those two:
:mod:`.pool`).

The files themselves (atomic writes, the ``format`` version, create-only-if-absent on
local disks and object stores alike) are :mod:`.files`. A decision and a recovery
are created only if absent (two drivers cannot both decide one batch: the second fails);
each decision carries a token, and only a driver holding it voids the decision
(:meth:`DecisionLog.void`).
Runs on: the driver only (planning and commit workers).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

import pyarrow.fs as pafs

from ...errors import ConfigError, DecisionLogConflictError
from ..handoff import TxnHandoff
from .files import FORMAT, store_failed  # noqa: F401 - FORMAT re-exported
from .pool import PoolFiles
from .states import UNFINISHED, State, recorded_events, state_after

_KEEP_DONE = 100  # finished decisions kept per lineage for inspection (eoskafka txns)
_KEEP_LINEAGES = 100  # finished other lineages (older queries, batch writes) kept
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_SUFFIXES = (".json", ".done", ".recovery", ".untold")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decision:
    batch_id: int
    handoffs: tuple[TxnHandoff, ...]
    done: bool
    lost: tuple[str, ...] = ()
    decided_at: float = 0.0
    #: When the batch was marked done (epoch seconds); None while it is undone.
    done_at: float | None = None
    #: Decided hand-offs the log shows aborted: a replay may rewrite them (LOST state).
    lost_handoffs: tuple[TxnHandoff, ...] = ()
    #: The recovery transactions copying the lost records from the log, each recorded
    #: before its EndTxn (a development build's before 0.1.0: replay hand-offs replacing
    #: lost ones).
    recovery: tuple[TxnHandoff, ...] | None = None
    lineage: str = ""
    #: Random, written by :meth:`DecisionLog.decide`; only its holder may void the decision
    #: ("" for decisions written before tokens existed).
    token: str = ""
    #: The batch as Spark planned it (:mod:`.batch_identity`): a batch id that comes back
    #: with another identity is not a replay. None in decisions written before it existed.
    identity: dict[str, Any] | None = None
    #: False while a batch write's user has not been told it committed (``.untold``).
    told: bool = True

    @property
    def state(self) -> State:
        """The state its files' events reach through the transition table (states.py)."""
        return state_after(recorded_events(
            done=self.done, lost=bool(self.lost), lost_handoffs=bool(self.lost_handoffs),
            recovery=self.recovery is not None))

    @property
    def committing(self) -> tuple[TxnHandoff, ...]:
        """Every transaction this decision still stands for: decided and recovery ones."""
        return (*self.handoffs, *(self.recovery or ()))


class DecisionLog(PoolFiles):
    """Decisions and pool state of one query's sink, in a directory.

    ``lineage`` selects whose decisions :meth:`get`, :meth:`decide`… read and write; None
    means the streaming query the log currently serves (``lineage.json``), which is what
    the CLI shows.
    """

    def __init__(self, location: str, lineage: str | None = None) -> None:
        self.location = location.rstrip("/") + "/eoskafka"
        try:
            self.fs, self.root = pafs.FileSystem.from_uri(_as_uri(self.location))
        except ValueError as exc:  # ArrowInvalid: a scheme pyarrow has no filesystem for
            raise ConfigError(
                f"the decision log cannot be kept at {self.location}: pyarrow has no "
                f"filesystem for it ({exc}). Give decisionLogLocation (or checkpointLocation) "
                "as a URI pyarrow writes: file://, s3://, gs://, abfs://, hdfs://.") from exc
        self.local = isinstance(self.fs, pafs.LocalFileSystem)
        try:
            self.fs.create_dir(f"{self.root}/decisions", recursive=True)
        except OSError as exc:
            raise store_failed(self.location, "created", "decisions", exc) from exc
        self._lineage = lineage
        self._dir_cache: str | None = None
        self._tokens: dict[str, str] = {}  # shared with for_lineage() views

    @property
    def lineage(self) -> str:
        if self._lineage is None:
            self._lineage = (self._read("lineage.json") or {}).get("current", "")
        return self._lineage

    def for_lineage(self, lineage: str) -> DecisionLog:
        """The same log, reading and writing ``lineage``'s decisions."""
        view = object.__new__(DecisionLog)
        view.__dict__.update(self.__dict__)
        view._lineage = lineage
        view._dir_cache = None
        return view

    # -- which query the log serves (invariant 8) ----------------------------------------------

    def bind(self, lineage: str, checkpoint: str) -> str | None:
        """Make sure this log serves streaming query ``lineage`` at ``checkpoint`` (a
        fingerprint of its checkpoint location); returns the lineage it replaced, if any.

        A new query id at the same checkpoint is a reset checkpoint: it becomes the log's
        query (its batch ids start again without meeting the old decisions). A query the
        log has replaced, or a query at another checkpoint, is refused: two deployments on
        one log would take each other's batches for replays.
        """
        info = self._read("lineage.json")
        if info is None:
            legacy = lineage if self._has_legacy() else None
            self._write("lineage.json", {"current": lineage, "checkpoint": checkpoint,
                                         "superseded": [], "legacy": legacy,
                                         "since": time.time(), "log": uuid.uuid4().hex})
            self._lineage, self._dir_cache = lineage, None
            return None
        current, owner = info.get("current", ""), info.get("checkpoint", "")
        if current == lineage and owner == checkpoint:
            return None
        where = f"decision log {self.location}"
        if lineage in info.get("superseded", ()):
            raise DecisionLogConflictError(
                f"this query (id {lineage}) was superseded in {where} by query {current} "
                f"(started {_when(info.get('since'))} on the same checkpoint path): its "
                "checkpoint was reset, or two deployments share the checkpoint path and "
                "decisionLogLocation. This query stops here so the two cannot take each "
                "other's batches; give each deployment its own checkpointLocation and "
                "decisionLogLocation (and transactionalIdPrefix), or stop this one.")
        if owner != checkpoint:
            raise DecisionLogConflictError(
                f"{where} belongs to query {current} (checkpoint fingerprint {owner}); this "
                f"query {lineage} has checkpoint fingerprint {checkpoint}. Two queries "
                "sharing one decision log would take each other's batches for replays: "
                "give this query its own decisionLogLocation (or delete the log's eoskafka "
                "directory if that query is gone for good and none of its batches is "
                "undone: `eoskafka txns --checkpoint` shows them).")
        superseded = [*info.get("superseded", ()), current][-20:]
        self._write("lineage.json", {**info, "current": lineage, "superseded": superseded,
                                     "since": time.time(),
                                     "log": info.get("log") or uuid.uuid4().hex})
        self._lineage, self._dir_cache = lineage, None
        return current

    def log_id(self) -> str:
        """This log's random id (``lineage.json``'s ``log``), "" before a query is bound: a
        prefix claim names it, so a driver finding another log at the claimed place knows."""
        info = self._read("lineage.json")
        if info and not info.get("log"):  # bound by a build before 0.1.0: named once
            info["log"] = uuid.uuid4().hex
            self._write("lineage.json", info)
        return str((info or {}).get("log", ""))

    def _has_legacy(self) -> bool:
        return any(i.type == pafs.FileType.File for i in self._list("decisions"))

    def _dir(self) -> str:
        """The selected lineage's directory: ``decisions/<lineage>``, or ``decisions``
        itself for decisions without a lineage (logs from before lineages existed, and the
        lineage that adopted them: ``lineage.json``'s ``legacy``)."""
        if self._dir_cache is None:
            lineage = self.lineage
            legacy = (self._read("lineage.json") or {}).get("legacy") if lineage else None
            flat = not lineage or lineage == legacy
            self._dir_cache = "decisions" if flat else f"decisions/{_SAFE.sub('_', lineage)}"
        return self._dir_cache

    def _name(self, batch_id: int, suffix: str) -> str:
        return f"{self._dir()}/{batch_id:020d}{suffix}"

    # -- decisions of the selected lineage -----------------------------------------------------

    def decide(self, batch_id: int, handoffs: list[TxnHandoff],
               identity: dict[str, Any] | None = None) -> None:
        """Record the commit decision; durable before the first EndTxn, created only once.
        ``identity``: the batch as Spark planned it (:mod:`.batch_identity`)."""
        self._create(self._name(batch_id, ".json"), {
            "batch_id": batch_id, "decided_at": time.time(), "lineage": self.lineage,
            "handoffs": [h.to_json() for h in handoffs], "identity": identity})

    def mark_untold(self, batch_id: int) -> None:
        """A batch write finished by abort(): its user saw a failure. Until :meth:`told`,
        the next batch write on this log reports it (PreviousWriteCompletedError)."""
        self._write(self._name(batch_id, ".untold"), {"batch_id": batch_id})

    def told(self, batch_id: int) -> None:
        self._delete(self._name(batch_id, ".untold"))

    def untold(self) -> list[Decision]:
        """Finished batch writes of any lineage whose user has not been told (one listing)."""
        out = []
        for directory, batches in sorted(self._scan().items()):
            for batch_id, present in sorted(batches.items()):
                if ".untold" in present and ".json" in present:
                    decision = self._decision(directory, batch_id)
                    if decision is not None:
                        out.append(replace(decision, told=False))
        return out

    def mark_done(self, batch_id: int, lost: list[str] | None = None,
                  lost_handoffs: list[TxnHandoff] | None = None) -> None:
        self._write(self._name(batch_id, ".done"), {
            "batch_id": batch_id, "lost": lost or [], "done_at": time.time(),
            "lost_handoffs": [h.to_json() for h in lost_handoffs or []]})

    def record_recovery(self, batch_id: int, handoffs: list[TxnHandoff]) -> None:
        """A batch's first recovery transaction (copying lost ones from the log); durable
        before its EndTxn, created only if absent."""
        self._create(self._name(batch_id, ".recovery"),
                     {"batch_id": batch_id, "handoffs": [h.to_json() for h in handoffs]})

    def append_recovery(self, batch_id: int, handoffs: list[TxnHandoff]) -> None:
        """The recovery's hand-offs so far, the new one last; durable before its EndTxn
        (the file, created by :meth:`record_recovery`, is replaced whole)."""
        self._write(self._name(batch_id, ".recovery"),
                    {"batch_id": batch_id, "handoffs": [h.to_json() for h in handoffs]})

    def clear_recovery(self, batch_id: int) -> None:
        """Drop the recovery record, only if it belongs to the decision this driver holds."""
        stem = self._name(batch_id, "")
        token = self._tokens.get(stem)
        if token is None or not self._delete_if(f"{stem}.recovery", token):
            log.warning("eoskafka: %s.recovery left in place: not the recovery of the "
                        "decision this driver read; the next recovery finishes it", stem)

    def void(self, batch_id: int, token: str | None = None) -> bool:
        """Withdraw a decision none of whose transactions committed (the batch will replay).

        Deletes only the decision holding ``token`` (default: the one this driver decided
        or last read for the batch) and returns whether it did: a zombie driver that voids
        late leaves alone the decision its replacement made since for the same batch. The
        files are read, compared and deleted: not atomic. A decision that another driver
        voids and decides anew in the milliseconds between this read and delete is deleted
        (any store; object stores have no conditional delete). The other files go before
        the ``.json``, so a crash in between leaves a decided batch (rolled forward again),
        never a ``.done`` that a new decision would inherit.
        """
        stem = self._name(batch_id, "")
        token = self._tokens.get(stem) if token is None else token
        if token is None:
            log.warning("eoskafka: decision %s not voided: this driver never read it", stem)
            return False
        return self._void_in(self._dir(), batch_id, token)

    def get(self, batch_id: int) -> Decision | None:
        return self._decision(self._dir(), batch_id)

    def _decision(self, directory: str, batch_id: int) -> Decision | None:
        data = self._read(f"{directory}/{batch_id:020d}.json")
        if data is None:
            return None
        done = self._read(f"{directory}/{batch_id:020d}.done")
        recovery = self._read(f"{directory}/{batch_id:020d}.recovery")
        return Decision(
            batch_id,
            tuple(TxnHandoff.from_json(h) for h in data["handoffs"]),
            done is not None,
            tuple((done or {}).get("lost", ())),
            data.get("decided_at", 0.0),
            (done or {}).get("done_at"),
            tuple(TxnHandoff.from_json(h) for h in (done or {}).get("lost_handoffs", ())),
            None if recovery is None
            else tuple(TxnHandoff.from_json(h) for h in recovery["handoffs"]),
            data.get("lineage") or _lineage_of(directory) or self.lineage,
            token=self._remember(f"{directory}/{batch_id:020d}", data.get("token", "")),
            identity=data.get("identity"),
        )

    def batch_ids(self) -> list[int]:
        return sorted(self._scan().get(self._dir(), {}))

    # -- every lineage -------------------------------------------------------------------------

    def _scan(self) -> dict[str, dict[int, set[str]]]:
        """One recursive listing: directory -> batch id -> suffixes present (no HEADs)."""
        return self._scan_with_times()[0]

    def _scan_with_times(self) -> tuple[dict[str, dict[int, set[str]]], dict[str, float]]:
        """:meth:`_scan`, and each directory's newest modification time."""
        out: dict[str, dict[int, set[str]]] = {}
        newest: dict[str, float] = {}
        base = f"{self.root}/"
        for info in self._list("decisions", recursive=True):
            if info.type != pafs.FileType.File:
                continue
            rel = info.path[len(base):] if info.path.startswith(base) else info.path
            directory, _, name = rel.rpartition("/")
            stem, dot, suffix = name.partition(".")
            if stem.isdigit() and f"{dot}{suffix}" in _SUFFIXES:
                out.setdefault(directory, {}).setdefault(int(stem), set()).add(f".{suffix}")
                stamp = info.mtime.timestamp() if info.mtime else 0.0
                newest[directory] = max(newest.get(directory, 0.0), stamp)
        return out, newest

    def unfinished(self) -> list[Decision]:
        """Decided batches of any lineage whose transactions may not all be committed yet
        (DECIDED, RECOVERING): what must be rolled forward before any task starts."""
        out = []
        for directory, batches in sorted(self._scan().items()):
            for batch_id, present in sorted(batches.items()):
                if ".json" in present and (".done" not in present or ".recovery" in present):
                    decision = self._decision(directory, batch_id)
                    if decision is not None and decision.state in UNFINISHED:
                        out.append(decision)
        return out

    undone = unfinished  # the name the CLI and older callers use

    def prune(self) -> None:
        """Drop old finished decisions: the newest ``_KEEP_DONE`` of this lineage and those
        of the newest ``_KEEP_LINEAGES`` other lineages stay (growth stays bounded)."""
        scan, newest = self._scan_with_times()
        mine = self._dir()
        for batch_id in sorted(scan.get(mine, {}))[:-_KEEP_DONE]:
            if scan[mine][batch_id] == {".json", ".done"}:
                self._void_in(mine, batch_id, None)
        others = [d for d, batches in scan.items() if d != mine and d != "decisions"
                  and all(p == {".json", ".done"} for p in batches.values())]
        if len(others) > _KEEP_LINEAGES:
            by_age = sorted(others, key=lambda d: newest.get(d, 0.0))  # oldest first
            for directory in by_age[:-_KEEP_LINEAGES]:
                for batch_id in scan[directory]:
                    self._void_in(directory, batch_id, None)
                self._delete_dir(directory)

    def _void_in(self, directory: str, batch_id: int, token: str | None) -> bool:
        """Delete a decision's files: those carrying ``token`` (legacy files carry none), or
        with None every file, for :meth:`prune` alone. Pruned decisions are finished
        (``.json`` and ``.done`` listed) and at least ``_KEEP_DONE`` batches old: no driver
        decides that batch id of that lineage again, so there is no newer decision there to
        spare."""
        stem = f"{directory}/{batch_id:020d}"
        if token is not None:
            found = self._read(f"{stem}.json")
            if found is not None and found.get("token", "") != token:
                log.warning("eoskafka: decision %s not voided: another driver decided the "
                            "batch since (a zombie driver's late void)", stem)
                return False
        for suffix in (s for s in _SUFFIXES if s != ".json"):  # the .json last
            if token is None:
                self._delete(f"{stem}{suffix}")
            else:
                self._delete_if(f"{stem}{suffix}", token)
        self._delete(f"{stem}.json")
        self._tokens.pop(stem, None)
        return True


def _lineage_of(directory: str) -> str:
    """The lineage a ``decisions/<lineage>`` directory holds ("" for ``decisions``)."""
    return directory.partition("/")[2]


def _when(stamp: float | None) -> str:
    return "at an unknown time" if not stamp else time.strftime(
        "%Y-%m-%d %H:%M:%S UTC", time.gmtime(stamp))


def _as_uri(location: str) -> str:
    """A URI pyarrow opens: plain paths are local; Hadoop's ``s3a://`` is ``s3://``."""
    from ..lineage import pyarrow_uri

    return pyarrow_uri(location)
