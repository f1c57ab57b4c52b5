"""Fault injection for tests: named points that production code passes through.

Inert unless ``EOSKAFKA_TEST_FAULTS`` (a spec) or ``EOSKAFKA_TEST_FAULTS_FILE``
(a file holding one, read at every point, so a running Spark session's
workers see changes) is set. A spec is a comma-separated list of
``point[/task]=action[@flag]``:

- ``/task`` limits the entry to task partition ``task``;
- ``@flag`` makes it fire once: the flag file is created when it fires and the
  entry is skipped while the file exists (works across processes);
- actions: ``raise`` (InjectedFault), ``drop`` (ConnectionDroppedError: the
  connection lost here, e.g. before a broker's answer was read), ``kill``
  (SIGKILL this process: a dead Python worker), ``killgroup`` (SIGKILL the
  process group: a dead driver),
  ``block:<path>`` (write this process id to ``<path>.started``, wait for
  ``<path>.release``; after ``EOSKAFKA_TEST_FAULTS_BLOCK_S`` seconds, 300 by
  default, write ``<path>.expired`` and raise InjectedFault: a test that never
  releases fails loudly instead of hanging),
  ``sleep:<seconds>`` (a slow step: a task that takes that long at this point),
  ``ioerror`` (InjectedIOError, an OSError: a store's failure as the OS or pyarrow
  raise it).

Example: ``commit.after_decision=killgroup@/tmp/once,write.after_flush/1=raise``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

ENV = "EOSKAFKA_TEST_FAULTS"
ENV_FILE = "EOSKAFKA_TEST_FAULTS_FILE"
ENV_BLOCK_S = "EOSKAFKA_TEST_FAULTS_BLOCK_S"
BLOCK_S = 300.0


class InjectedFault(RuntimeError):
    """Raised by the ``raise`` action."""


class InjectedIOError(OSError):
    """Raised by the ``ioerror`` action."""


def _spec() -> str:
    spec = os.environ.get(ENV, "")
    path = os.environ.get(ENV_FILE)
    if path:
        try:
            spec = ",".join(filter(None, [spec, Path(path).read_text().strip()]))
        except FileNotFoundError:
            pass
    return spec


def _entries(name: str, task: int | None) -> list[tuple[str, str]]:
    out = []
    for entry in _spec().split(","):
        where, _, action = entry.strip().partition("=")
        point, _, only_task = where.partition("/")
        if point != name or (only_task and str(task) != only_task):
            continue
        action, _, flag = action.partition("@")
        out.append((action, flag))
    return out


def armed(name: str, *, task: int | None = None) -> bool:
    """Whether a fault is configured at ``name`` (lets code take a fault-friendly path)."""
    return any(not flag or not os.path.exists(flag) for _, flag in _entries(name, task))


def fault_point(name: str, *, task: int | None = None) -> None:
    """Pass through fault point ``name``; does nothing unless a test armed it."""
    if ENV not in os.environ and ENV_FILE not in os.environ:
        return
    for action, flag in _entries(name, task):
        if flag:
            try:
                fd = os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            os.close(fd)
        _act(action, name)


def _java_ancestor() -> int | None:
    """The nearest ancestor process running java (Spark's JVM), from /proc."""
    pid = os.getppid()
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if name == "java":
            return pid
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
    return None


def _act(action: str, name: str) -> None:
    if action == "raise":
        raise InjectedFault(f"injected fault at {name}")
    if action == "ioerror":
        raise InjectedIOError(f"injected: I/O error at {name}")
    if action == "drop":
        from .errors import ConnectionDroppedError

        raise ConnectionDroppedError(f"injected: connection lost at {name}")
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "killgroup":
        jvm = _java_ancestor()
        if jvm is not None:
            os.killpg(os.getpgid(jvm), signal.SIGKILL)
        os.killpg(os.getpgid(0), signal.SIGKILL)
    if action.startswith("block:"):
        path = action.split(":", 1)[1]
        Path(f"{path}.started").write_text(str(os.getpid()))  # who is blocked (chaos harness)
        limit = float(os.environ.get(ENV_BLOCK_S) or BLOCK_S)
        deadline = time.monotonic() + limit
        while not os.path.exists(f"{path}.release"):
            if time.monotonic() > deadline:
                Path(f"{path}.expired").write_text(str(os.getpid()))
                message = (f"fault point {name}: block:{path} not released within {limit:g}s "
                           f"(no {path}.release)")
                print(f"eoskafka faults: {message}", file=sys.stderr, flush=True)
                raise InjectedFault(message)
            time.sleep(0.01)
        return
    if action.startswith("sleep:"):
        time.sleep(float(action.split(":", 1)[1]))  # a slow task, not a synchronisation
        return
    raise ValueError(f"{ENV}: unknown action {action!r} at {name}")
