"""Fixtures shared by the sink's broker tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kafka_helpers import create_topic
from tests.sink_harness import Harness


@pytest.fixture
def sink(bootstrap: str, unique: str, tmp_path: Path) -> Harness:
    """A two-partition topic and a prepared sink with its decision log (the session's
    broker); modules with their own cluster define their own ``sink``."""
    create_topic(bootstrap, unique, partitions=2)
    h = Harness(bootstrap, unique, unique, tmp_path / "ckpt")
    h.driver.prepare(new_run=True)
    return h
