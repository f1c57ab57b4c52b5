"""Which query a write belongs to: Spark's query id, read where each hook runs.

Spark keeps a streaming query's id in ``<checkpointLocation>/metadata`` (``{"id": ...}``,
written when the query is created, before any batch): stable across restarts, new after
the checkpoint is deleted. Decisions are keyed by it (invariant 8), so a reset checkpoint
is a new query whose batch ids never meet the old query's decisions.

- Driver (planning and commit workers): :func:`query_id_at` reads the metadata file
  through pyarrow's filesystems (``s3a://`` is read as ``s3://``). Where it cannot be read
  it returns None: the planning worker then refuses by name (spark_checkpoint.py), the
  commit takes the id from the hand-offs.
- Executors: :func:`task_lineage` reads the ``sql.streaming.queryId`` local property.
Runs on: the driver and executors.
"""

from __future__ import annotations

import json
import logging
import os
import re

import pyarrow.fs as pafs

log = logging.getLogger(__name__)

#: Hadoop's S3 connectors name the same objects pyarrow reads as s3://.
_SCHEMES = {"s3a": "s3", "s3n": "s3"}
#: A URI scheme (two characters at least: ``C:\\x`` is a Windows path).
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")


def query_id_at(checkpoint_location: str | None) -> str | None:
    """Spark's query id from the checkpoint's ``metadata`` file; None when it cannot be
    read (no checkpoint, a scheme pyarrow has no filesystem for, not written yet)."""
    if not checkpoint_location:
        return None
    uri = pyarrow_uri(checkpoint_location.rstrip("/") + "/metadata")
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
        with fs.open_input_stream(path) as src:
            first = src.read().decode("utf-8", "replace").splitlines()[0]
        return str(json.loads(first)["id"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, IndexError) as exc:  # ArrowInvalid: a ValueError
        log.info("eoskafka: cannot read the query id at %s (%s); taking it from the tasks",
                 uri, exc)
        return None


def task_lineage(context: object | None) -> str:
    """A task's query id (streaming), "" outside a streaming query."""
    if context is None:
        return ""
    value = context.getLocalProperty("sql.streaming.queryId")  # type: ignore[attr-defined]
    return value or ""


def has_scheme(location: str) -> bool:
    """Whether ``location`` names its filesystem (``hdfs://nn/x``, and Hadoop's
    ``dbfs:/x``, ``file:/x`` forms too): a path without one is resolved by Spark against
    ``fs.defaultFS`` and by pyarrow on the local disk (spark_checkpoint.py)."""
    return _SCHEME.match(location) is not None


def pyarrow_uri(location: str) -> str:
    """A URI pyarrow's filesystems open (shared with the decision log). Hadoop's one-slash
    form (``file:/x``, ``dbfs:/x``) is the same as ``file:///x``: never a relative path."""
    found = _SCHEME.match(location)
    if found is None:
        return "file://" + os.path.abspath(location)
    scheme, rest = found.group(1), location[found.end():]
    if not rest.startswith("//"):
        rest = "//" + rest if rest.startswith("/") else rest
    return f"{_SCHEMES.get(scheme.lower(), scheme)}:{rest}"
