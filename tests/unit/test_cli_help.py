"""What ``eoskafka`` says before it connects anywhere: its version, each command's help.

No broker: help and ``--version`` exit before any connection.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import eos_kafka_source
from eos_kafka_source.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main([*argv, "--help"]) == 0
    return capsys.readouterr().out


def test_version_has_one_source(capsys) -> None:
    """``eoskafka --version`` and ``__version__`` agree, and pyproject.toml takes the
    package's version from ``_version.py``, which ``__version__`` hands on (the built wheel's
    metadata is checked against it in tests/deploy/test_wheel.py); the CHANGELOG's newest
    release is that version."""
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"eoskafka {eos_kafka_source.__version__}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "eos_kafka_source._version.__version__"}
    released = re.findall(r"^## (\d+\.\d+\.\d+) \(\d{4}-\d\d-\d\d\)",
                          (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert released[0] == eos_kafka_source.__version__


def test_broker_help_has_no_client_options(capsys) -> None:
    """Starting a broker connects to none: no --bootstrap-server or --config in its help."""
    text = _help(capsys, "broker")
    assert "--bootstrap-server" not in text and "--config" not in text
    assert "--json" in text and "--nodes" in text
    assert main(["broker", "--bootstrap-server", "x:1"]) == 2
    assert "unrecognized arguments: --bootstrap-server" in capsys.readouterr().err
    for command in ("txns", "fence", "audit", "lag", "migrate"):
        assert "--bootstrap-server" in _help(capsys, command)


def test_fence_examples_show_dry_run_as_the_look_and_probe_as_fencing(capsys) -> None:
    """A reader takes "probe" for a read-only look: the examples show --dry-run for that,
    and --probe's help says it fences."""
    top = _help(capsys)
    fence_lines = [ln for ln in top.splitlines() if "eoskafka fence" in ln]
    assert fence_lines and all("--dry-run" in ln and "--probe" not in ln for ln in fence_lines)
    text = " ".join(_help(capsys, "fence").split())
    assert "--checkpoint /chk/orders --dry-run # list the ids; changes nothing" in text
    assert "also fence (abort) open transactions past the pool" in text
    assert "it changes things: --dry-run is the look that does not" in text


def test_fence_dry_run_from_a_checkpoint_needs_no_broker(tmp_path: Path, capsys) -> None:
    """The example the help gives first runs as shown: no -b, nothing contacted."""
    from eos_kafka_source.sink.decisions.log import DecisionLog
    from eos_kafka_source.sink.decisions.pool import PoolState

    DecisionLog(str(tmp_path)).save_pool(PoolState(size=3, prefix="eoskafka-abc"))
    assert main(["fence", "--checkpoint", str(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dry run: would fence 3 id(s) of prefix eoskafka-abc" in out
