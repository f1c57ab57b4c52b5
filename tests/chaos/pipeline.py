"""The harness's handle on the driver process (tests/chaos/driver_job.py).

Starts it in its own session (so SIGKILL of its group takes the driver JVM and
its Python workers with it), reads its ``CHAOS-EVENT`` lines into a list that
waiters block on, and sends it commands on stdin.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
Event = dict[str, Any]


class Pipeline:
    def __init__(self, config: dict[str, Any], work: Path, env: dict[str, str]) -> None:
        self.config_path = work / "driver-config.json"
        self.config_path.write_text(json.dumps(config, indent=1))
        self.work, self.env = work, {**env, "PYTHONPATH": str(ROOT)}
        self.events: list[Event] = []
        self._cond = threading.Condition()
        self._proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.unexpected_exits = 0

    # -- process ---------------------------------------------------------------------------

    def start(self) -> None:
        log = open(self.work / "driver.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.chaos.driver_job", str(self.config_path)],
                cwd=ROOT, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=log, start_new_session=True,
            )
        finally:
            log.close()
        self._proc = proc
        self.starts += 1
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        with open(self.work / "driver-events.log", "ab") as copy:
            for raw in proc.stdout:
                copy.write(raw)
                copy.flush()
                line = raw.decode(errors="replace")
                if line.startswith("CHAOS-EVENT "):
                    event = json.loads(line[len("CHAOS-EVENT "):])
                    event["pid"] = proc.pid
                    with self._cond:
                        self.events.append(event)
                        self._cond.notify_all()
        proc.wait()
        with self._cond:
            self.events.append({"event": "exited", "t": time.time(), "pid": proc.pid,
                                "code": proc.returncode})
            self._cond.notify_all()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the driver's whole process group (python, driver JVM, its Python workers)."""
        proc = self._proc
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def send(self, command: str) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(command.encode() + b"\n")
        self._proc.stdin.flush()

    def ensure_running(self) -> bool:
        """Restart the driver if it exited on its own; True if it had to."""
        if self.alive:
            return False
        self.unexpected_exits += self._proc is not None
        self.start()
        return True

    # -- events ----------------------------------------------------------------------------

    def mark(self) -> int:
        with self._cond:
            return len(self.events)

    def wait_for(self, match: Callable[[Event], bool], since: int, timeout_s: float
                 ) -> Event | None:
        """The first event at index >= ``since`` that matches, waiting up to ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for event in self.events[since:]:
                    if match(event):
                        return event
                since = len(self.events)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def wait_progress(self, since: int, timeout_s: float) -> Event | None:
        """A batch that read rows, after ``since``; restarts a driver that died meanwhile."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pid = self.pid

            def match(e: Event, pid: int | None = pid) -> bool:
                return (e["event"] == "progress" and e["rows"] > 0) or (
                    e["event"] == "exited" and e["pid"] == pid)

            event = self.wait_for(match, since, deadline - time.monotonic())
            if event is None or event["event"] == "progress":
                return event
            since = self.mark()
            self.ensure_running()
        return None

    def count(self, kind: str) -> int:
        with self._cond:
            return sum(e["event"] == kind for e in self.events)
