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
builder setting as a ``--conf``; ``start-connect-server.sh`` too) puts the static settings
on its command line, a ``--properties-file`` (YARN's application master, a Kubernetes
driver pod) or ``$SPARK_CONF_DIR/spark-defaults.conf`` holds the rest. Spark's task slots
are fixed by those static settings (a runtime ``spark.conf.set`` cannot change them). An
in-process classic SparkContext, when there is one, is asked directly.

The rule (:func:`slots_from_conf`) is what Spark itself sizes executors by, divided by
``spark.task.cpus`` per executor. ``spark.default.parallelism`` when set; else by master:

- ``local[N]``/``local[*]``: N threads; ``local-cluster[n,c,m]``: n x c.
- standalone (``spark://``): ``spark.cores.max`` (``--total-executor-cores``) cores, in
  whole executors of ``spark.executor.cores`` when set; with dynamic allocation,
  ``spark.dynamicAllocation.maxExecutors`` x ``spark.executor.cores`` under that cap.
- YARN and Kubernetes: ``spark.executor.instances`` (``--num-executors``, Spark's default 2)
  x ``spark.executor.cores`` (default 1); with dynamic allocation,
  ``spark.dynamicAllocation.maxExecutors`` x cores (a batch never runs more at once).

Anything else (no ``spark.cores.max`` on standalone, where executors take every worker's
cores; dynamic allocation without a maximum; another master; a platform that starts the
driver its own way; a system without ``/proc``): unknown, and the source keeps one task
per offset range, as Spark's connector, saying so once at WARNING with the option to set.
WARNING because it is the level a Python worker's log reaches the driver's log at: no
handler is configured in Spark's Python workers, so Python's last-resort handler writes
WARNING and above to the worker's stderr, which Spark copies to the driver JVM's stderr;
an INFO line is dropped before it is written anywhere.
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
    "--total-executor-cores": "spark.cores.max",
}
_LOCAL = re.compile(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]")
#: Executors Spark starts on YARN and Kubernetes when ``spark.executor.instances`` is unset.
_DEFAULT_EXECUTORS = 2
#: How many parent processes up the driver JVM may be (worker <- daemon <- JVM).
_ANCESTORS = 4


def slots_from_conf(conf: Mapping[str, str], cpus: int | None = None) -> int | None:
    """Task slots from Spark properties, or None when they do not say.

    >>> slots_from_conf({"spark.master": "local[2,3]"})
    2
    >>> slots_from_conf({"spark.master": "spark://h:7077", "spark.cores.max": "2",
    ...                  "spark.executor.cores": "1"})
    2
    >>> slots_from_conf({"spark.master": "spark://h:7077"}) is None
    True
    """
    explicit = _positive(conf.get("spark.default.parallelism"))
    if explicit is not None:
        return explicit
    per_task = _positive(conf.get("spark.task.cpus")) or 1
    master = conf.get("spark.master", "").strip()
    local = _LOCAL.fullmatch(master)
    if local:
        n = local.group(1)
        threads = 1 if n is None else (cpus if cpus is not None else _cpus()) if n == "*" \
            else _positive(n)
        return max(1, threads // per_task) if threads else None
    cluster = _LOCAL_CLUSTER.fullmatch(master)
    if cluster:
        return _standalone(conf, per_task, workers=int(cluster.group(1)),
                           worker_cores=int(cluster.group(2)))
    if master.startswith("spark://"):
        return _standalone(conf, per_task)
    if master == "yarn" or master.startswith("k8s://"):
        return _instances(conf, per_task)
    return None


def _dynamic(conf: Mapping[str, str]) -> bool:
    return conf.get("spark.dynamicAllocation.enabled", "false").strip().lower() == "true"


def _per_executor(cores: int, per_task: int) -> int:
    return max(1, cores // per_task)


def _standalone(conf: Mapping[str, str], per_task: int, workers: int | None = None,
                worker_cores: int | None = None) -> int | None:
    """A standalone master grants an application ``spark.cores.max`` cores (all the workers'
    when unset), in executors of ``spark.executor.cores`` (a worker's all when unset)."""
    cap = _positive(conf.get("spark.cores.max"))
    if workers is not None and worker_cores is not None:  # local-cluster: the cluster is known
        total = workers * worker_cores
        cap = min(cap, total) if cap else total
    cores = _positive(conf.get("spark.executor.cores"))
    if _dynamic(conf):
        most = _positive(conf.get("spark.dynamicAllocation.maxExecutors"))
        if most is not None and cores is not None:
            cap = min(cap, most * cores) if cap else most * cores
    if cap is None:
        return None
    if cores is None:  # executors take what a worker has, up to the cap
        return max(1, cap // per_task)
    executors = cap // cores
    return executors * _per_executor(cores, per_task) if executors else None


def _instances(conf: Mapping[str, str], per_task: int) -> int | None:
    """YARN and Kubernetes: executor instances x cores, as Spark requests them."""
    cores = _positive(conf.get("spark.executor.cores")) or 1
    if _dynamic(conf):
        executors = _positive(conf.get("spark.dynamicAllocation.maxExecutors"))
    else:
        raw = conf.get("spark.executor.instances")
        executors = _DEFAULT_EXECUTORS if raw is None else _positive(raw)
    return executors * _per_executor(cores, per_task) if executors else None


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


def _driver() -> tuple[int, list[str]] | None:
    """The nearest ancestor Java process (the driver JVM): its pid and command line, from /proc."""
    pid = os.getppid()
    for _ in range(_ANCESTORS):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        words = [a.decode(errors="replace") for a in argv if a]
        if words and os.path.basename(words[0]) in ("java", "java.exe"):
            return pid, words
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the name: the ppid
        if pid <= 1:
            return None
    return None


def _driver_argv() -> list[str] | None:
    found = _driver()
    return found[1] if found else None


def properties_file(argv: Sequence[str]) -> str | None:
    """The ``--properties-file`` a driver was started with (spark-submit's, and YARN's
    application master's ``__spark_conf__.properties``), or None."""
    for i, arg in enumerate(argv):
        if arg == "--properties-file" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--properties-file="):
            return arg.partition("=")[2]
    return None


def _read(path: Path) -> dict[str, str] | None:
    try:
        return defaults_conf(path.read_text())
    except (OSError, UnicodeDecodeError):
        return None


def conf_of(argv: Sequence[str] | None, cwd: Path | None,
            conf_dir: str | None) -> tuple[dict[str, str], list[str]]:
    """Spark properties as spark-submit layers them: ``spark-defaults.conf`` (not read when a
    ``--properties-file`` replaces it, unless ``--load-spark-defaults``), that file, then the
    command line. Returns them and where they were read from."""
    conf: dict[str, str] = {}
    where: list[str] = []
    given = properties_file(argv) if argv is not None else None
    if conf_dir and (given is None or "--load-spark-defaults" in (argv or ())):
        found = _read(Path(conf_dir, "spark-defaults.conf"))
        if found is not None:
            conf.update(found)
            where.append("spark-defaults.conf")
    if given is not None:
        path = Path(given) if cwd is None else cwd / given  # an absolute path stays itself
        found = _read(path)
        if found is not None:
            conf.update(found)
            where.append(f"the properties file {given}")
    if argv is not None:
        conf.update(submit_conf(argv))
        where.append("the driver JVM's command line")
    return conf, where


def _visible_conf() -> tuple[dict[str, str], str]:
    """The driver's static Spark properties this process can see, and where they came from."""
    conf_dir = os.environ.get("SPARK_CONF_DIR") or (
        os.path.join(os.environ["SPARK_HOME"], "conf") if "SPARK_HOME" in os.environ else None)
    driver = _driver()
    cwd = None
    if driver is not None:
        try:
            cwd = Path(os.readlink(f"/proc/{driver[0]}/cwd"))
        except OSError:
            cwd = None
    conf, where = conf_of(driver[1] if driver else None, cwd, conf_dir)
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
    """The cluster's task slots, or None (logged once at WARNING: see the module's docstring
    for why that level) when they cannot be known."""
    slots = _active_context_slots()
    if slots is not None:
        log.debug("eoskafka source: %d task slots (SparkContext.defaultParallelism)", slots)
        return slots
    conf, where = _visible_conf()
    slots = slots_from_conf(conf)
    if slots is None:
        log.warning(
            "eoskafka source: the cluster's task slots are not known (master %r, read from %s): "
            "each batch runs one task per offset range, possibly in several waves. Set the "
            "source option maxPartitions to the cores the query's executors have (or give "
            "Spark spark.cores.max on standalone, a dynamic allocation's maxExecutors) for one "
            "wave of tasks a batch", conf.get("spark.master"), where)
    else:
        log.debug("eoskafka source: %d task slots (from %s)", slots, where)
    return slots
