"""The package as users get it: a built wheel in a fresh venv, not this editable checkout.

Builds the sdist and wheel (``python -m build``), checks their metadata
(``twine check`` and the fields a release needs), installs the wheel alone into a
new virtual environment and runs ``format("eoskafka")`` with no ``register()``
call, in local mode and on a Spark standalone cluster (executors are separate
JVMs whose Python workers must import eoskafka from that venv, not from here).
"""

from __future__ import annotations

import email
import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eos_kafka_source.broker import free_port
from tests.chaos.cluster import SparkCluster
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions, committed_values

pytestmark = [pytest.mark.spark, pytest.mark.wheel]

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("wheel_job.py")


@dataclass(frozen=True)
class Installed:
    dist: Path
    wheel: Path
    venv: Path

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")


def _run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=900, **kwargs)  # type: ignore[call-overload]


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"{proc.args} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    _ok(_run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(dist),
              str(ROOT)]))
    (wheel,) = dist.glob("eoskafka-*.whl")
    venv = work / "venv"
    _ok(_run([sys.executable, "-m", "venv", str(venv)]))
    _ok(_run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)]))
    yield Installed(dist, wheel, venv)


def test_release_metadata_passes_twine_check(installed: Installed) -> None:
    out = _ok(_run([sys.executable, "-m", "twine", "check", "--strict",
                    *map(str, sorted(installed.dist.iterdir()))]))
    assert out.count("PASSED") == 2, out
    with zipfile.ZipFile(installed.wheel) as whl:
        names = whl.namelist()
        meta = email.message_from_bytes(whl.read(next(n for n in names
                                                      if n.endswith(".dist-info/METADATA"))))
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Requires-Python"] == ">=3.11"
    assert meta["Description-Content-Type"] == "text/markdown"
    assert {"broker", "connect", "dev"} <= set(meta.get_all("Provides-Extra"))
    classifiers = meta.get_all("Classifier")
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "Typing :: Typed" in classifiers
    assert "pyspark_eoskafka/__init__.py" in names and "eos_kafka_source/py.typed" in names
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)


def test_broker_command_from_a_plain_install_names_the_extra(installed: Installed) -> None:
    proc = _run([str(installed.venv / "bin" / "eoskafka"), "broker", "--port", str(free_port())])
    assert proc.returncode == 2
    assert "its [broker] extra" in proc.stderr and "pip install '.[broker]'" in proc.stderr, \
        proc.stderr


def _job(installed: Installed, master: str, bootstrap: str, topic: str, cwd: Path) -> dict:
    create_topic(bootstrap, topic, partitions=2)
    out = _ok(_run([installed.python, str(JOB), master, bootstrap, topic], cwd=cwd,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)}))
    line = next(ln for ln in out.splitlines() if ln.startswith("WHEEL-JOB "))
    result = json.loads(line.removeprefix("WHEEL-JOB "))
    want = sorted(f"w{i}" for i in range(100))
    assert result["read"] == want
    assert sorted(v.decode() for v in committed_values(bootstrap, topic)) == want  # type: ignore[union-attr]
    for where in (result["driver_module"], result["task_module"]):
        assert where.startswith(str(installed.venv)), f"eoskafka imported from {where}"
    assert_no_open_transactions(bootstrap, topic)
    return result


@pytest.mark.parametrize("where", ["local", "standalone"])
def test_plain_wheel_format_eoskafka_without_register(
    installed: Installed, bootstrap: str, unique: str, tmp_path: Path, where: str
) -> None:
    if where == "local":
        _job(installed, "local[2]", bootstrap, unique, tmp_path)
        return
    cluster = SparkCluster(tmp_path / "cluster", workers=2).start()
    try:
        _job(installed, cluster.url, bootstrap, unique, tmp_path)
    finally:
        cluster.stop()


def test_readme_quick_start_runs_as_written(installed: Installed, tmp_path: Path) -> None:
    """README's quick start, verbatim, as a newcomer runs it: the wheel with its [broker]
    extra in a fresh venv, no broker, no topics, no session, nothing else set up."""
    from tests import doc_blocks

    _ok(_run([installed.python, "-m", "pip", "install", "-q",
              f"{installed.wheel}[broker]"]))
    script = tmp_path / "quickstart.py"
    script.write_text(doc_blocks.block(
        "README.md", "# quickstart.py: copy a Kafka topic exactly once with Spark, from nothing."
    ).text)
    out = _ok(_run([installed.python, str(script)], cwd=tmp_path,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}))
    rows = [line.split("|")[1:3] for line in out.splitlines() if line.startswith("|")]
    assert [[c.strip() for c in r] for r in rows] == [
        ["key", "value"], ["alpha", "ALPHA"], ["beta", "BETA"], ["gamma", "GAMMA"]], out
