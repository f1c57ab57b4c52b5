"""The package as users get it: a built wheel in a fresh venv, not this editable checkout.

Every step of ``make release`` (tests/deploy/release.py), as a newcomer meets them: the
sdist and wheel built by README's own build block in a clone and a throwaway venv, checked
(``twine check`` and the fields a release needs); the wheel alone in a new virtual
environment, running ``format("eoskafka")`` with no ``register()`` call, in local mode and
on a Spark standalone cluster (executors are separate JVMs whose Python workers must import
eoskafka from that venv, not from here); then README's install line (only the extras it
names) and its quick start, verbatim, on the embedded broker and twice on one broker; the
other extras README names bring what their code imports.
"""

from __future__ import annotations

import email
import json
import subprocess
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eos_kafka_source.broker import EmbeddedBroker, free_port
from tests.chaos.cluster import SparkCluster
from tests.deploy import release
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions, committed_values

pytestmark = [pytest.mark.spark, pytest.mark.wheel]

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("wheel_job.py")


@dataclass(frozen=True)
class Installed:
    built: release.Built
    venv: Path

    @property
    def dist(self) -> Path:
        return self.built.dist

    @property
    def wheel(self) -> Path:
        return self.built.wheel

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
    """README's build block in a clone (twine-checked, the version agreed), then the wheel
    alone, no extras, in a fresh venv."""
    work = tmp_path_factory.mktemp("wheel")
    built = release.build(work)
    venv = release.venv(work / "venv").parent
    _ok(_run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(built.wheel)]))
    yield Installed(built, venv)


def test_release_metadata(installed: Installed) -> None:
    """The fields a release needs (twine's check and the version: release.build)."""
    import eos_kafka_source

    assert installed.built.version == eos_kafka_source.__version__
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
    """README's install line for the wheel (only the extras it names, those of the quick
    start's own install line; ``eoskafka --version`` agrees), then its quick start verbatim,
    as a newcomer runs it: no broker, no topics, no session, nothing else set up. Then
    twice on one broker (BOOTSTRAP=...), as README says a rerun behaves: the same three
    lines each time, and three records in the output topic, not six."""
    release.install_as_readme_says(installed.built, installed.venv / "bin")
    python = installed.venv / "bin" / "python"
    assert release.quick_start(python, tmp_path) == release.EXPECTED
    broker = EmbeddedBroker().start()
    try:
        for _ in range(2):
            assert release.quick_start(python, tmp_path, broker.bootstrap_servers) == \
                release.EXPECTED
        assert sorted(committed_values(broker.bootstrap_servers, "events-clean")) == [  # type: ignore[type-var]
            b"ALPHA", b"BETA", b"GAMMA"]
    finally:
        broker.stop()


_AVRO_WRITE = """
import pyarrow as pa
from eos_kafka_source.formats.plans import codec
from eos_kafka_source.formats.schemas import RegisteredSchema
TEXT = '{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}'
SCHEMA = RegisteredSchema(1, "AVRO", TEXT)
class Lookup:
    def by_id(self, i): return SCHEMA
avro = codec("avro")
column = pa.array([{"a": 7}], avro.arrow_type(SCHEMA, Lookup()))
out = avro.encoder(SCHEMA, Lookup()).encode(column, "value")
print(avro.decoder(SCHEMA, Lookup()).decode(out, str).values.to_pylist())
"""


def test_avro_without_its_extra_names_it_and_with_it_writes(installed: Installed) -> None:
    """The wheel without extras: an Avro codec names the [avro] extra (pyarrow alone brings
    no numpy); with ``[avro]`` installed (fastavro and numpy), a record encodes and decodes."""
    proc = _run([installed.python, "-c", _AVRO_WRITE])
    assert proc.returncode != 0
    assert "needs the Python package(s)" in proc.stderr and \
        "py3-none-any.whl[avro]'" in proc.stderr, proc.stderr[-3000:]
    _ok(_run([installed.python, "-m", "pip", "install", "-q", f"{installed.wheel}[avro]"]))
    assert _ok(_run([installed.python, "-c", _AVRO_WRITE])).strip() == "[{'a': 7}]"


def test_readme_extras_bring_what_they_need(installed: Installed) -> None:
    """The extras README's install block names, from the wheel: each format's extra
    declares every package its codec imports (a missing numpy in [avro] fails here, not
    for a user), and [schemas] and [connect] installed in the fresh venv import cleanly."""
    assert release.check_extras(installed.built, installed.venv / "bin") == [
        "schemas", "connect"]
