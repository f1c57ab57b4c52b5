"""Where Spark keeps a query's checkpoint, read from Spark's own files, never guessed.

The sink reads two of Spark's checkpoint files: ``metadata`` (the query id, written when
the query starts) and ``offsets/<N>`` (batch N's input, written before its writer is
planned). Both exist before the first ``streamWriter()`` of a run, so:

- A location without a scheme is resolved by Spark against Hadoop's ``fs.defaultFS``
  (``hdfs:`` on YARN, ``dbfs:`` on Databricks); pyarrow opens it on the driver's disk. If
  ``metadata`` is not there, Spark's checkpoint is elsewhere and a decision log here would
  be lost with the driver (invariant 15): :func:`spark_query_id` refuses, naming both.
- Where a file cannot be read (a scheme pyarrow has no filesystem for, a store error), the
  sink cannot tell a replay from another batch (invariant 13): a named error, never a guess.
- A checkpoint given only as ``spark.sql.streaming.checkpointLocation`` reaches no writer
  option; tasks see it as a local property (Spark propagates its SQL conf) and hand it to
  the driver, which finds ``<conf>/<queryName>``, or the ``<conf>/<uuid>`` whose
  ``metadata`` holds the query's id (:func:`conf_checkpoint`).
Runs on: the driver (planning and commit workers); :func:`task_conf_checkpoint` on executors.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow.fs as pafs

from ..errors import CheckpointElsewhereError, CheckpointUnreadableError
from .handoff import TxnHandoff
from .lineage import has_scheme, pyarrow_uri

#: The hand-off ``extra`` key a task puts ``spark.sql.streaming.checkpointLocation`` in.
CONF_KEY = "spark_checkpoint_conf"
#: (conf root, query id) -> the checkpoint found under it (a listing, once per process).
_FOUND: dict[tuple[str, str], str] = {}


def read_text(location: str, name: str) -> str | None:
    """``<location>/<name>`` as text; None if it does not exist. Raises
    :class:`CheckpointUnreadableError` where it cannot be read."""
    uri = pyarrow_uri(f"{location.rstrip('/')}/{name}")
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
    except ValueError as exc:  # ArrowInvalid: a scheme pyarrow has no filesystem for
        raise _no_filesystem(location, uri, exc) from exc
    except OSError as exc:
        raise _store_error(uri, exc) from exc
    try:
        with fs.open_input_stream(path) as src:
            return src.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _store_error(uri, exc) from exc


def spark_query_id(location: str) -> str:
    """The query id in Spark's ``<location>/metadata``, which Spark wrote before any batch;
    raises where this driver does not see Spark's checkpoint at ``location``."""
    text = read_text(location, "metadata")
    if text is None:
        if not has_scheme(location):
            raise CheckpointElsewhereError(elsewhere(location))
        raise CheckpointUnreadableError(
            f"Spark's checkpoint file {location.rstrip('/')}/metadata does not exist, "
            "although Spark writes it when the query starts: the driver reads another "
            "store than Spark writes (an s3a:// location is read as s3://). Give "
            "checkpointLocation as a URI this driver's pyarrow reads the same objects at.")
    try:
        return str(json.loads(text.splitlines()[0])["id"])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise CheckpointUnreadableError(
            f"Spark's checkpoint file {location.rstrip('/')}/metadata holds no query id "
            f"({exc}); it is not a Spark checkpoint. Give the query's own "
            "checkpointLocation.") from exc


def elsewhere(location: str) -> str:
    """Why a location without a scheme is refused, naming both places and the fix."""
    local = pyarrow_uri(location)
    return (
        f"checkpointLocation {location!r} has no scheme: Spark resolves it against "
        "Hadoop's default filesystem (fs.defaultFS: hdfs: on YARN, dbfs: on Databricks) "
        f"and keeps its checkpoint there, but this driver finds no Spark checkpoint at "
        f"{local} ({local}/metadata does not exist), where the decision log would go. A "
        "decision log on the driver's own disk is lost with the driver, and a batch "
        "replayed after that is committed again (duplicates). Give checkpointLocation "
        "with its scheme, as Spark resolves it (for example hdfs://<namenode>/path, "
        "s3://bucket/path, or file:///path if the driver's local disk is meant).")


def refuse_another_query(location: str, read: str | None,
                         handoffs: Sequence[TxnHandoff]) -> None:
    """Commit: the query id this driver read at ``location`` must be the one Spark's tasks
    run; another one means a stale checkpoint here and Spark's elsewhere."""
    running = {h.lineage for h in handoffs if h.lineage}
    if not read or not running or running == {read}:
        return
    message = (f"{location.rstrip('/')}/metadata, as this driver reads it, names query "
               f"{read}, but Spark's tasks run query {', '.join(sorted(running))}: Spark "
               "keeps this query's checkpoint elsewhere.")
    if not has_scheme(location):
        raise CheckpointElsewhereError(f"{message} {elsewhere(location)}")
    raise CheckpointUnreadableError(f"{message} Give checkpointLocation as the URI Spark "
                                    "writes, readable from the driver.")


def task_conf_checkpoint(context: object | None) -> str | None:
    """On an executor: ``spark.sql.streaming.checkpointLocation`` as the task sees it."""
    if context is None:
        return None
    value = context.getLocalProperty(  # type: ignore[attr-defined]
        "spark.sql.streaming.checkpointLocation")
    return value or None


def conf_checkpoint(handoffs: Sequence[TxnHandoff], query_name: str | None,
                    query_id: str | None) -> str | None:
    """Spark's checkpoint of a query given only ``spark.sql.streaming.checkpointLocation``:
    ``<conf>/<queryName>``, else the ``<conf>/<uuid>`` whose ``metadata`` names
    ``query_id``. None when no task reported the conf (nothing to read)."""
    roots = {str(h.extra[CONF_KEY]) for h in handoffs if h.extra.get(CONF_KEY)}
    if not roots:
        return None
    root = sorted(roots)[0].rstrip("/")
    if query_name:
        found = spark_query_id(f"{root}/{query_name}")
        if query_id and found != query_id:
            raise CheckpointUnreadableError(
                f"Spark's checkpoint {root}/{query_name} (spark.sql.streaming."
                f"checkpointLocation and the queryName) holds query {found}, but the tasks "
                f"run query {query_id}: the driver does not read the store Spark writes. "
                "Give the query option('checkpointLocation', ...) with its scheme.")
        return f"{root}/{query_name}"
    if not query_id:
        return None
    if (root, query_id) not in _FOUND:
        _FOUND[(root, query_id)] = _search(root, query_id)
    return _FOUND[(root, query_id)]


def _search(root: str, query_id: str) -> str:
    """The directory under ``root`` whose Spark ``metadata`` holds ``query_id``."""
    uri = pyarrow_uri(root)
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
        children = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    except ValueError as exc:
        raise _no_filesystem(root, uri, exc) from exc
    except OSError as exc:
        raise _store_error(uri, exc) from exc
    for child in sorted(c.base_name for c in children if c.type == pafs.FileType.Directory):
        try:
            if spark_query_id(f"{root}/{child}") == query_id:
                return f"{root}/{child}"
        except (CheckpointElsewhereError, CheckpointUnreadableError):
            continue  # not a checkpoint (or not this one)
    if not has_scheme(root):
        raise CheckpointElsewhereError(elsewhere(f"{root}/<query>").replace(
            "checkpointLocation", "spark.sql.streaming.checkpointLocation", 1))
    raise CheckpointUnreadableError(
        f"no checkpoint under spark.sql.streaming.checkpointLocation {root} holds query "
        f"{query_id} (Spark keeps it at {root}/<queryName or a random id>). Give the query "
        "option('checkpointLocation', ...) (or a queryName).")


def _no_filesystem(location: str, uri: str, exc: Exception) -> CheckpointUnreadableError:
    return CheckpointUnreadableError(
        f"eoskafka reads Spark's checkpoint files (metadata, offsets/<batch>) to tell a "
        f"replayed batch from a new one, and pyarrow has no filesystem for {uri} ({exc}). "
        f"Without them a replay cannot be told from a rewound batch, so {location} is "
        "refused. Give checkpointLocation as a URI pyarrow reads (file://, s3://, gs://, "
        "abfs://, hdfs://; s3a:// is read as s3://); on Databricks the cloud storage URI "
        "behind a dbfs: path.")


def _store_error(uri: str, exc: Exception) -> CheckpointUnreadableError:
    return CheckpointUnreadableError(
        f"Spark's checkpoint file {uri} could not be read ({type(exc).__name__}: {exc}). "
        "The batch fails and nothing of it is committed; once the store answers again "
        "(reachability, permissions, credentials) the restarted query replays it.")
