"""The fault hook itself: a ``block:`` that nobody releases fails instead of hanging."""

from __future__ import annotations

import threading
import time

import pytest

from eos_kafka_source import faults


def test_block_fails_loudly_at_its_deadline(monkeypatch, tmp_path, capsys) -> None:
    gate = tmp_path / "gate"
    monkeypatch.setenv(faults.ENV, f"here=block:{gate}")
    monkeypatch.setenv(faults.ENV_BLOCK_S, "0.3")
    started = time.monotonic()
    with pytest.raises(faults.InjectedFault, match=r"here: block:.* not released within 0.3s"):
        faults.fault_point("here")
    assert 0.3 <= time.monotonic() - started < 10
    assert (tmp_path / "gate.started").exists() and (tmp_path / "gate.expired").exists()
    assert "not released" in capsys.readouterr().err


def test_block_returns_when_released(monkeypatch, tmp_path) -> None:
    gate = tmp_path / "gate"
    monkeypatch.setenv(faults.ENV, f"here=block:{gate}")
    monkeypatch.setenv(faults.ENV_BLOCK_S, "30")
    release = threading.Timer(0.2, (tmp_path / "gate.release").touch)
    release.start()
    try:
        faults.fault_point("here")  # returns, no exception
    finally:
        release.cancel()
    assert not (tmp_path / "gate.expired").exists()


def test_sleep_slows_the_point(monkeypatch) -> None:
    monkeypatch.setenv(faults.ENV, "here=sleep:0.2")
    started = time.monotonic()
    faults.fault_point("here")
    faults.fault_point("elsewhere")  # not armed: no wait
    assert 0.2 <= time.monotonic() - started < 10
