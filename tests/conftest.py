"""Session fixtures: one embedded broker and one SparkSession per test session."""

from __future__ import annotations

import itertools
import os
import sys
import uuid
from collections.abc import Iterator

import pytest

from eos_kafka_source.broker import EmbeddedBroker

_counter = itertools.count()


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture(scope="session")
def bootstrap(broker: EmbeddedBroker) -> str:
    return broker.bootstrap_servers


@pytest.fixture
def unique() -> str:
    """A name no other test in this session uses (topics, transactional ids, paths)."""
    return f"t{next(_counter)}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master(os.environ.get("EOSKAFKA_TEST_MASTER", "local[2]"))
        .appName("eoskafka-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.triggerAvailableNowWrapper.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
