"""``eoskafka registry``: a schema registry for development, and nothing left running after.

The command starts Apicurio Registry (its JVM in a session of its own, so a signal to the
command's process group does not reach it) and must stop it on SIGTERM and Ctrl-C
(SIGINT), and when the command itself is killed (SIGKILL cannot be caught: the JVM is
started with a parent-death signal).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from eos_kafka_source import apicurio
from eos_kafka_source.cli import main
from tests.waiting import until

EOSKAFKA = str(Path(sys.executable).with_name("eoskafka"))


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL],
                         ids=["sigterm", "ctrl-c", "sigkill"])
def test_registry_serves_confluents_api_and_a_stop_leaves_nothing_running(
        sig: signal.Signals) -> None:
    proc = subprocess.Popen([EOSKAFKA, "registry", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    jvm = None
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        doc = json.loads(line)
        jvm = doc["pid"]
        assert doc["url"].startswith("http://127.0.0.1:") and \
            doc["url"].endswith("/apis/ccompat/v7")
        with urllib.request.urlopen(doc["url"] + "/subjects", timeout=30) as resp:
            assert json.loads(resp.read()) == []
        with urllib.request.urlopen(doc["url"] + "/config", timeout=30) as resp:
            assert json.loads(resp.read())["compatibilityLevel"] == "BACKWARD"
        proc.send_signal(sig)
        code = proc.wait(timeout=60)
        if sig != signal.SIGKILL:
            assert code == 0, proc.stderr.read() if proc.stderr else ""
        until(lambda: _gone(jvm), bool, what=f"the registry's JVM (pid {jvm}) to exit",
              timeout_s=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if jvm is not None and not _gone(jvm):
            os.killpg(jvm, signal.SIGKILL)


def test_without_java_21_it_says_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(apicurio, "MIN_JAVA", 99)
    assert main(["registry"]) == 2
    err = capsys.readouterr().err
    assert "EOSKAFKA_REGISTRY_UNAVAILABLE" in err and "needs Java 99 or newer; found Java" in err
    assert "Install a JDK 99+" in err
