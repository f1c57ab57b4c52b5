"""The decision log's files: atomic writes, create-only-if-absent, tokens and format.

Through pyarrow's filesystems, so HDFS, S3, GCS and ABFS work as local directories do.
Writes are write-then-rename, fsync'ed on local disks (HDFS's rename over a file is
delete-then-rename: :meth:`DecisionFiles._read` with ``recover`` finds the new copy).
Create-only-if-absent is link(2) on local disks and, on object stores and HDFS, uniquely
named candidates and a consistent listing (:meth:`DecisionFiles._claim`). A decision's
files carry its token (:meth:`DecisionFiles._delete_if` deletes only the holder's), and
every file this eoskafka writes carries ``"format": FORMAT``; a newer format is refused
(docs/compatibility.md, "Compatibility promise").
Runs on: the driver only (planning and commit workers).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import random
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pyarrow.fs as pafs

from ...errors import DecisionLogConflictError, DecisionLogFormatError, DecisionStoreError
from ...faults import fault_point

#: The file format this eoskafka writes (each file's ``"format"``; none means version 1).
#: Older formats stay readable; a newer one is refused (docs/compatibility.md). 3: a
#: ``.recovery`` may hold several recovery transactions, each naming the offset ranges it
#: copied; a reader of 2 would take the first for the whole copy.
FORMAT = 3
#: Object stores' create-only-if-absent (:meth:`DecisionFiles._claim`): a candidate's owner
#: writes the final file within ``_CLAIM_S`` of starting its candidate, or retries; a
#: candidate ``_STALE_S`` older than a newer one (store clock) was left by a driver that
#: crashed or stalled and is broken; a creator waits up to ``_WAIT_S`` for another
#: driver's fresh candidate to become a decision (then it fails) or to go away.
_CLAIM_S = 10.0
_STALE_S = 30.0
_WAIT_S = 40.0
#: Stores where a written object becomes visible whole when its upload completes: written
#: in place (a rename there is a copy and a delete: two more requests per write).
_ATOMIC_PUT = ("s3", "gcs")

log = logging.getLogger(__name__)

_R = TypeVar("_R")


def store_failed(location: str, doing: str, name: str, exc: OSError) -> DecisionStoreError:
    """The store's own failure (a full disk, a permission, an object store's or HDFS's
    error: an OSError from the OS or pyarrow) as one named error with the fix, instead of a
    client's traceback."""
    return DecisionStoreError(
        f"the decision log at {location} could not be {doing} ({name}: {exc}). Nothing "
        "decided is lost: a batch that needed this fails, and once the store works again "
        "(space, permissions, credentials, reachability) the restarted query replays it or "
        "finishes its decision from the log (docs/lifecycle.md).")


def _store_failure(doing: str) -> Callable[[Callable[..., _R]], Callable[..., _R]]:
    """A method whose OSError becomes :func:`store_failed`'s error; the log's own refusals
    (conflict, format) pass as they are."""

    def wrap(method: Callable[..., _R]) -> Callable[..., _R]:
        @functools.wraps(method)
        def call(self: DecisionFiles, name: str, *args: Any, **kwargs: Any) -> _R:
            try:
                return method(self, name, *args, **kwargs)
            except OSError as exc:
                raise store_failed(self.location, doing, name, exc) from exc
        return call

    return wrap


class DecisionFiles:
    """The file layer :class:`~.decision_log.DecisionLog` builds on: names are relative to
    ``root`` on ``fs``; a decision's files are ``<stem>.json/.done/.recovery``."""

    location: str
    fs: pafs.FileSystem
    root: str
    local: bool
    #: ``<dir>/<batch>`` -> token of the decision this driver created or last read there:
    #: what it may delete.
    _tokens: dict[str, str]

    def _path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def _remember(self, stem: str, token: str) -> str:
        self._tokens[stem] = token
        return token

    def _encode(self, name: str, payload: dict[str, Any], token: str | None = None) -> bytes:
        """The file's bytes: the payload, this eoskafka's ``format`` and, for a decision's
        files, the decision's token (given, or the one this driver holds for it)."""
        body = {**payload, "format": FORMAT}
        token = self._tokens.get(name.rpartition(".")[0]) if token is None else token
        if token:  # only a decision's stems have tokens
            body["token"] = token
        return json.dumps(body, sort_keys=True).encode()

    @_store_failure("written")
    def _write(self, name: str, payload: dict[str, Any]) -> None:
        """Replace ``name`` atomically (write, fsync, rename; fsync the directory)."""
        fault_point("store.write")  # the sweep's "decision store fails a write"
        self._replace(self._path(name), self._encode(name, payload))

    def _replace(self, final: str, data: bytes) -> None:
        if self.fs.type_name in _ATOMIC_PUT:  # an object appears whole or not at all
            with self.fs.open_output_stream(final) as out:
                out.write(data)
            return
        tmp = f"{final}.{uuid.uuid4().hex}.tmp"
        if self.local:
            os.makedirs(os.path.dirname(final), exist_ok=True)
            _write_synced(tmp, data)
            os.replace(tmp, final)
            _sync_dir(os.path.dirname(final))
            return
        self.fs.create_dir(final.rpartition("/")[0], recursive=True)
        with self.fs.open_output_stream(tmp) as out:
            out.write(data)
        self.fs.move(tmp, final)  # HDFS: delete-then-rename; _read(recover=True) covers it

    @_store_failure("written")
    def _create(self, name: str, payload: dict[str, Any]) -> None:
        """Create ``name`` only if it does not exist, else DecisionLogConflictError.

        A new decision (``.json``) gets a new token; a recovery carries its decision's.
        Local disks: link(2) of a complete temporary file, atomic. Object stores and HDFS
        (no conditional put through pyarrow; a listing that is read-after-write consistent,
        as S3's is since 2020): :meth:`_claim`.
        """
        fault_point("store.write")
        stem = name.rpartition(".")[0]
        token = uuid.uuid4().hex if name.endswith(".json") else self._tokens.get(stem, "")
        data = self._encode(name, payload, token)
        if self.local:
            final = self._path(name)
            os.makedirs(os.path.dirname(final), exist_ok=True)
            tmp = f"{final}.{uuid.uuid4().hex}.tmp"
            _write_synced(tmp, data)
            try:
                fault_point("store.before_final")
                os.link(tmp, final)
            except FileExistsError:
                raise self._conflict(name, "already exists") from None
            finally:
                os.unlink(tmp)
            _sync_dir(os.path.dirname(final))
        else:
            self._claim(name, data)
        if name.endswith(".json"):
            self._remember(stem, token)

    def _claim(self, name: str, data: bytes) -> None:
        """Create-only-if-absent from plain writes, deletes and a consistent listing.

        Each round writes a uniquely named candidate ``<name>.<id>.claim``, then lists the
        candidates and the final name. A final already there is a conflict. Another fresh
        candidate means another driver is creating it too: this one deletes its own and
        tries again (both may back off; neither goes on) until ``_WAIT_S``, then fails. A
        driver alone goes on, writes the final, deletes its candidate. Two can never both
        be alone: each lists after its own write, so the later writer sees the earlier
        candidate, which stays until its final exists.

        A candidate without a final was left by a driver that crashed or stalled before
        writing its final; such a driver sent no EndTxn for that decision (EndTxn comes
        only after ``decide()`` returns), so breaking its candidate loses nothing. It is
        broken when it is ``_STALE_S`` older than this round's own candidate, by the
        store's timestamps (no clock skew between drivers). That is safe because an owner
        writes its final only within ``_CLAIM_S`` of starting its candidate (it checks its
        own clock just before; past it, it retries with a new candidate). What remains: an
        owner that passes that check and stalls ``_STALE_S - _CLAIM_S`` (20 s) before its
        final lands (a paused process, a retried PUT) can overwrite a decision made after
        its candidate was broken. Its own transactions were fenced by then (the new driver
        fences the pool before its tasks), so its decision commits nothing, but the
        decision it overwrote is lost to recovery.
        """
        final = self._path(name)
        directory, _, base = final.rpartition("/")
        self.fs.create_dir(directory, recursive=True)
        give_up, pause = time.monotonic() + _WAIT_S, 0.05
        while True:
            started = time.monotonic()
            mine = f"{final}.{uuid.uuid4().hex}.claim"
            with self.fs.open_output_stream(mine) as out:
                out.write(data)
            try:
                others, exists, stamp = self._candidates(directory, base, mine)
                if exists:
                    raise self._conflict(name, "already exists")
                fresh = [i for i in others if stamp - _mtime(i) <= _STALE_S]
                if not fresh:
                    for info in others:
                        log.warning("eoskafka: breaking %s, a stale candidate of a driver "
                                    "that crashed or stalled before deciding", info.path)
                        self.fs.delete_file(info.path)
                    fault_point("store.before_final")
                    if time.monotonic() - started <= _CLAIM_S:
                        self._replace(final, data)
                        return
            finally:
                self._delete_path(mine)
            if time.monotonic() > give_up:
                raise self._conflict(name, "is being created by another driver (candidate "
                                     f"{fresh[0].base_name})" if fresh else
                                     f"could not be created within {_WAIT_S:g} s")
            time.sleep(random.uniform(pause / 2, pause))  # the other may be alone now
            pause = min(pause * 2, 2.0)  # a crashed driver's candidate takes _STALE_S

    def _candidates(self, directory: str, base: str,
                    mine: str) -> tuple[list[pafs.FileInfo], bool, float]:
        """Other candidates for ``base``, whether ``base`` exists, and the store's
        timestamp of ``mine`` (one listing)."""
        others, exists, stamp = [], False, None
        for info in self.fs.get_file_info(pafs.FileSelector(directory)):
            if info.base_name == base:
                exists = True
            elif info.path == mine or info.path.endswith("/" + mine.rpartition("/")[2]):
                stamp = _mtime(info)
            elif info.base_name.startswith(base + ".") and info.base_name.endswith(".claim"):
                others.append(info)
        if stamp is None:
            raise DecisionLogConflictError(
                f"{mine} is not listed right after it was written: the store's listing is "
                "not read-after-write consistent, which the decision log needs. Put "
                "decisionLogLocation on a store that is (S3, HDFS, GCS, ABFS, a local disk).")
        return others, exists, stamp

    def _conflict(self, name: str, what: str) -> DecisionLogConflictError:
        return DecisionLogConflictError(
            f"{name} {what} in {self.location}: another driver already decided this batch "
            "(two drivers on one checkpoint, or two queries on one decisionLogLocation). "
            "Stop the other query; each query needs its own checkpoint and decision log.")

    @_store_failure("read")
    def _read(self, name: str, *, recover: bool = False) -> dict[str, Any] | None:
        try:
            with self.fs.open_input_stream(self._path(name)) as src:
                return self._known(name, json.loads(src.read()))
        except FileNotFoundError:
            return self._recover(name) if recover else None

    def _known(self, name: str, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` if this eoskafka knows its format; a newer format is refused."""
        version = data.get("format", 1)
        if isinstance(version, int) and version <= FORMAT:
            return data
        raise DecisionLogFormatError(
            f"{self.location}/{name} has format {version}: it was written by a newer "
            f"eoskafka; this one ({_version()}) reads formats up to {FORMAT}. Upgrade "
            "eoskafka on the driver to the version that wrote it (the usual cause: a "
            "rollback after an upgrade), or point decisionLogLocation at a new, empty "
            "location (the old log's unfinished batches are then not rolled forward: "
            "check them first with `eoskafka txns`).")

    def _recover(self, name: str) -> dict[str, Any] | None:
        """A replaced file caught between delete and rename (HDFS): its complete new copy."""
        directory, _, base = name.rpartition("/")
        newest: tuple[float, dict[str, Any]] | None = None
        for info in self._list(directory):
            if info.base_name.startswith(base + ".") and info.base_name.endswith(".tmp"):
                try:
                    with self.fs.open_input_stream(info.path) as src:
                        data = self._known(name, json.loads(src.read()))
                except (OSError, ValueError):
                    continue  # a write that did not finish
                stamp = info.mtime.timestamp() if info.mtime else 0.0
                if newest is None or stamp > newest[0]:
                    newest = (stamp, data)
        return None if newest is None else newest[1]

    @_store_failure("read")
    def _exists(self, name: str) -> bool:
        return self.fs.get_file_info(self._path(name)).type != pafs.FileType.NotFound

    @_store_failure("listed")
    def _list(self, directory: str, recursive: bool = False) -> list[pafs.FileInfo]:
        path = f"{self.root}/{directory}" if directory else self.root
        selector = pafs.FileSelector(path, allow_not_found=True, recursive=recursive)
        return self.fs.get_file_info(selector)

    @_store_failure("changed")
    def _delete(self, name: str) -> None:
        self._delete_path(self._path(name))

    def _delete_path(self, path: str) -> None:
        try:
            self.fs.delete_file(path)
        except FileNotFoundError:
            pass

    def _delete_if(self, name: str, token: str) -> bool:
        """Delete ``name`` if it carries ``token`` (or none: written before tokens existed);
        returns False when it belongs to another decision. Read, then delete: see void()."""
        found = self._read(name)
        if found is not None and found.get("token", token) != token:
            return False
        self._delete(name)
        return True

    def _delete_dir(self, directory: str) -> None:
        try:
            self.fs.delete_dir(self._path(directory))
        except (FileNotFoundError, OSError):
            pass


def _mtime(info: pafs.FileInfo) -> float:
    return info.mtime.timestamp() if info.mtime else 0.0


def _version() -> str:
    from ..._version import __version__

    return f"eoskafka {__version__}"


def _write_synced(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
