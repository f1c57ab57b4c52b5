"""A test session stopped by SIGTERM (CI's deadline, a developer's ``kill``) stops the
broker it started instead of leaving it running (tests/termination.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.waiting import until

pytestmark = pytest.mark.tansu_only  # about the test harness: one broker kind is enough

ROOT = Path(__file__).resolve().parents[2]

INNER = textwrap.dedent('''
    import os
    import threading

    import pytest

    from eos_kafka_source.broker import EmbeddedBroker
    from tests.termination import stop_cleanly_on_sigterm

    stop_cleanly_on_sigterm()


    @pytest.fixture(scope="session")
    def broker():
        with EmbeddedBroker() as b:
            yield b


    def test_holds_the_broker(broker):
        with open(os.environ["BROKER_PID_FILE"], "w") as out:
            out.write(str(broker._proc.pid))
        threading.Event().wait(600)  # until the outer test's SIGTERM
''')


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_tears_the_session_down_and_stops_its_broker(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    pid_file = tmp_path / "broker.pid"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BROKER_PID_FILE": str(pid_file)}
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(tmp_path / "test_inner.py")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    broker_pid = None
    try:
        text = until(lambda: pid_file.read_text() if pid_file.exists() else "",
                     lambda t: t.strip().isdigit(), timeout_s=120,
                     what="the inner session's broker started")
        broker_pid = int(text)
        assert _alive(broker_pid)
        session.send_signal(signal.SIGTERM)
        output = session.communicate(timeout=60)[0].decode(errors="replace")
        assert not _alive(broker_pid), f"broker {broker_pid} outlived its session:\n{output}"
        assert session.returncode != 0, output  # interrupted, not passed
        assert "KeyboardInterrupt" in output, output
    finally:
        if session.poll() is None:
            session.kill()
            session.wait()
        if broker_pid is not None and _alive(broker_pid):
            os.kill(broker_pid, signal.SIGKILL)
