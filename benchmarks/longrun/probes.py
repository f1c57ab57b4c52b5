"""What the long-run benchmark samples: processes (from /proc), directories, the broker.

Everything here is load-insensitive (sizes and counts), so a loaded, shared machine
does not distort it; only the commit time the benchmark reads from the decision log is.
Processes are found by tree: the driver JVM is this Python process's ``java`` child, and
every Python process under that JVM is a Spark Python worker; the query's planning worker
(``streamReader()`` and the sink's ``streamWriter()`` run there: docs/design.md) is
the long-lived one, told apart by its command line.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from eos_kafka_source.apache_kafka.tools import TRANSACTIONS, KafkaTools

_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    cmdline: str

    def rss_mb(self) -> float:
        with open(f"/proc/{self.pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE / 2**20

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def rss_kind_mb(self, kind: str) -> float:
        """``RssAnon`` (heap and native memory) or ``RssFile`` (mapped files: a broker's
        log indexes, the JVM's own jars) from /proc/<pid>/status."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(f"{kind}:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def threads(self) -> int:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
        return 0


def heap_after_gc_mb(pid: int) -> float:
    """A JVM's live heap: a full GC (``jcmd GC.run``), then the used heap it reports.
    What separates a leak from G1 growing its heap toward ``-Xmx`` (RSS alone cannot)."""
    subprocess.run(["jcmd", str(pid), "GC.run"], capture_output=True, timeout=60, check=True)
    info = subprocess.run(["jcmd", str(pid), "GC.heap_info"], capture_output=True, text=True,
                          timeout=60, check=True).stdout
    used = re.search(r"heap\s+total \d+K, used (\d+)K", info)
    if used is None:
        raise ValueError(f"no heap line in jcmd's answer: {info[:200]!r}")
    return int(used.group(1)) / 1024


def processes() -> dict[int, Proc]:
    out: dict[int, Proc] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out[int(entry)] = Proc(int(entry), ppid, cmd)
    return out


def descendants(procs: dict[int, Proc], root: int) -> Iterator[Proc]:
    children: dict[int, list[Proc]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p)
    stack = list(children.get(root, ()))
    while stack:
        p = stack.pop()
        yield p
        stack.extend(children.get(p.pid, ()))


def driver_jvm(procs: dict[int, Proc] | None = None) -> Proc:
    """The Spark driver JVM this process started (pyspark's launcher runs it as a child)."""
    procs = procs or processes()
    for p in descendants(procs, os.getpid()):
        if "java" in p.cmdline.split(" ", 1)[0] and "SparkSubmit" in p.cmdline:
            return p
    raise RuntimeError("no Spark driver JVM under this process")


def python_workers(jvm_pid: int) -> list[Proc]:
    return [p for p in descendants(processes(), jvm_pid) if "python" in p.cmdline]


#: Spark's Python processes under the driver JVM by role (the module on the command line):
#: every role but the source runner is a pyspark.daemon that forks reused workers.
ROLES = {
    "source_runner": "python_streaming_source_runner",  # streamReader(): the planning worker
    "writer_factory": "write_into_data_source",  # streamWriter(), once per batch
    "commit_worker": "python_streaming_sink_runner",  # the sink's commit()/abort()
    "task_worker": "pyspark.worker",  # read() and write() (local mode: under the driver)
}


def role_of(p: Proc) -> str:
    return next((role for role, module in ROLES.items() if module in p.cmdline), "other")


def safe(fn, default=0):  # type: ignore[no-untyped-def]
    """A probe of a process that may just have exited."""
    try:
        return fn()
    except (OSError, ValueError):
        return default


@dataclass(frozen=True)
class DirStats:
    bytes: int
    files: int


def dir_stats(root: str | Path, *, exclude: str | None = None) -> DirStats:
    """Total size and file count under ``root`` (skipping the subdirectory ``exclude``)."""
    size = files = 0
    for base, dirs, names in os.walk(root):
        if exclude is not None and Path(base) == Path(root):
            dirs[:] = [d for d in dirs if d != exclude]
        for name in names:
            try:
                size += os.stat(os.path.join(base, name)).st_size
                files += 1
            except OSError:
                continue
    return DirStats(size, files)


class BrokerCounts:
    """Transactional ids and active producer ids as Kafka's own tool reports them."""

    def __init__(self, bootstrap: str) -> None:
        self.tools = KafkaTools(bootstrap)

    def transactional_ids(self, prefix: str = "") -> int:
        return sum(1 for row in self.tools.transactions()
                   if row.get("TransactionalId", "").startswith(prefix))

    def producers(self, topic: str, partitions: int) -> int:
        """Active producer ids (``describe-producers``) summed over ``topic``'s partitions:
        the broker keeps each one's state until ``producer.id.expiration.ms``."""
        total = 0
        for p in range(partitions):
            text = self.tools.run(TRANSACTIONS, "describe-producers", "--topic", topic,
                                  "--partition", str(p))
            total += sum(1 for line in text.splitlines()[1:] if line.strip())
        return total
