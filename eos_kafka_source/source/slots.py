"""How many tasks the cluster runs at once (its task slots), as far as the planner can tell.

Why: packing a batch's offset ranges into at most that many input partitions makes one
wave of tasks a batch instead of several (:mod:`.packing`; docs/latency.md). It is the
source's default when ``maxPartitions`` is not set.

Where from. The planner runs in a Python worker that Spark starts under the driver JVM
(the Spark Connect server's JVM under Spark Connect), never in the user's Python process:
there is no SparkSession or SparkContext there (``SparkSession.getActiveSession()`` is
None, measured on pyspark 4.0-4.3, classic and Connect), and Spark passes its workers no
configuration about parallelism. What the worker can read is how the driver JVM was
started: ``spark-submit`` (which pyspark's own ``SparkSession.builder`` runs, with every
builder setting as a ``--conf``) puts the static settings on its command line, and
``$SPARK_CONF_DIR/spark-defaults.conf`` holds the rest. Spark's task slots are fixed by
those static settings (a runtime ``spark.conf.set`` cannot change them). An in-process
classic SparkContext, when there is one, is asked directly.

The rule (:func:`slots_from_conf`): ``spark.default.parallelism`` when set; else the master's
cores (``local[N]``, ``local[*]``, ``local-cluster[n,c,m]``) or, without dynamic allocation,
``spark.executor.instances`` x ``spark.executor.cores``; divided by ``spark.task.cpus``.
Anything else (dynamic allocation, a standalone or YARN cluster sized elsewhere, a
platform that starts the driver its own way, a system without ``/proc``): unknown, and
the source keeps one task per offset range, as Spark's connector, saying so once at INFO.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

#: spark-submit flags that set a Spark property (flag -> property).
_FLAGS = {
    "--master": "spark.master",
    "--num-executors": "spark.executor.instances",
    "--executor-cores": "spark.executor.cores",
}
_LOCAL = re.compile(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]")
#: How many parent processes up the driver JVM may be (worker <- daemon <- JVM).
_ANCESTORS = 4


def slots_from_conf(conf: Mapping[str, str], cpus: int | None = None) -> int | None:
    """Task slots from Spark properties, or None when they do not say.

    >>> slots_from_conf({"spark.master": "local[2,3]"})
    2
    >>> slots_from_conf({"spark.master": "yarn"}) is None
    True
    """
    explicit = _positive(conf.get("spark.default.parallelism"))
    if explicit is not None:
        return explicit
    cores = _cores(conf, cpus if cpus is not None else _cpus())
    if cores is None:
        return None
    per_task = _positive(conf.get("spark.task.cpus")) or 1
    return max(1, cores // per_task)


def _cores(conf: Mapping[str, str], cpus: int) -> int | None:
    master = conf.get("spark.master", "").strip()
    local = _LOCAL.fullmatch(master)
    if local:
        n = local.group(1)
        return 1 if n is None else cpus if n == "*" else _positive(n)
    cluster = _LOCAL_CLUSTER.fullmatch(master)
    if cluster:
        return int(cluster.group(1)) * int(cluster.group(2)) or None
    if conf.get("spark.dynamicAllocation.enabled", "false").strip().lower() == "true":
        return None  # executors come and go
    instances = _positive(conf.get("spark.executor.instances"))
    cores = _positive(conf.get("spark.executor.cores"))
    return instances * cores if instances and cores else None


def _positive(value: str | None) -> int | None:
    try:
        n = int(str(value).strip())
    except ValueError:
        return None
    return n if n > 0 else None


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def submit_conf(argv: Sequence[str]) -> dict[str, str]:
    """The Spark properties a driver JVM's command line sets (``-Dspark.*``, and
    spark-submit's ``--conf``/``-c`` and the flags in :data:`_FLAGS`).

    >>> submit_conf(["java", "-cp", "x", "org.apache.spark.deploy.SparkSubmit",
    ...              "--conf", "spark.master=local[2]", "pyspark-shell"])
    {'spark.master': 'local[2]'}
    """
    conf: dict[str, str] = {}
    args = list(argv)
    for i, arg in enumerate(args):
        if arg.startswith("-Dspark.") and "=" in arg:
            key, _, value = arg[2:].partition("=")
            conf.setdefault(key, value)
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if arg in ("--conf", "-c") and "=" in nxt:
            key, _, value = nxt.partition("=")
            conf[key.strip()] = value.strip()
        elif arg.startswith("--conf=") and "=" in arg[7:]:
            key, _, value = arg[7:].partition("=")
            conf[key.strip()] = value.strip()
        elif arg in _FLAGS and nxt:
            conf[_FLAGS[arg]] = nxt
    return conf


def defaults_conf(text: str) -> dict[str, str]:
    """``spark-defaults.conf``: ``key value`` (or ``key=value``) lines, ``#`` comments."""
    conf: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, *rest = re.split(r"\s*[=:\s]\s*", line, maxsplit=1)
        if key.startswith("spark."):
            conf[key] = rest[0].strip() if rest else ""
    return conf


def _driver_argv() -> list[str] | None:
    """The command line of the nearest ancestor Java process (the driver JVM), from /proc."""
    pid = os.getppid()
    for _ in range(_ANCESTORS):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        words = [a.decode(errors="replace") for a in argv if a]
        if words and os.path.basename(words[0]) in ("java", "java.exe"):
            return words
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the name: the ppid
        if pid <= 1:
            return None
    return None


def _visible_conf() -> tuple[dict[str, str], str]:
    """The driver's static Spark properties this process can see, and where they came from."""
    conf: dict[str, str] = {}
    where = []
    conf_dir = os.environ.get("SPARK_CONF_DIR") or (
        os.path.join(os.environ["SPARK_HOME"], "conf") if "SPARK_HOME" in os.environ else None)
    if conf_dir:
        try:
            conf.update(defaults_conf(Path(conf_dir, "spark-defaults.conf").read_text()))
            where.append("spark-defaults.conf")
        except OSError:
            pass
    argv = _driver_argv()
    if argv is not None:
        conf.update(submit_conf(argv))
        where.append("the driver JVM's command line")
    return conf, " and ".join(where) or "nothing"


def _active_context_slots() -> int | None:
    """``defaultParallelism`` of a classic SparkContext running in this very process."""
    try:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        return int(sc.defaultParallelism) if sc is not None else None
    except Exception:  # noqa: BLE001 - no context, or Spark Connect: not knowable here
        return None


@functools.cache
def task_slots() -> int | None:
    """The cluster's task slots, or None (logged once at INFO) when they cannot be known."""
    slots = _active_context_slots()
    if slots is not None:
        log.debug("eoskafka source: %d task slots (SparkContext.defaultParallelism)", slots)
        return slots
    conf, where = _visible_conf()
    slots = slots_from_conf(conf)
    if slots is None:
        log.info("eoskafka source: the cluster's task slots are not known here (read %s; "
                 "master %r): one task per offset range. Set the source option "
                 "maxPartitions to the task slots for one wave of tasks a batch",
                 where, conf.get("spark.master"))
    else:
        log.debug("eoskafka source: %d task slots (from %s)", slots, where)
    return slots
