"""gcpause.freeze_imports: a reused Spark worker's modules leave its collections."""

from __future__ import annotations

import gc
import sys
import types
from collections.abc import Iterator

import pytest

from eos_kafka_source import gcpause


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(gcpause, "_frozen_at_modules", 0)
    yield
    gc.unfreeze()  # the test process keeps collecting everything


def test_outside_a_reused_worker_nothing_is_frozen(fresh: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    assert gcpause.freeze_imports() is False
    assert gc.get_freeze_count() == 0


def test_a_reused_worker_freezes_once_per_new_import(fresh: None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    assert gcpause.freeze_imports() is True
    frozen = gc.get_freeze_count()
    assert frozen > 1000  # the modules' objects: what pyspark's gc.collect() walked
    assert gcpause.freeze_imports() is False  # nothing imported since: no freeze
    monkeypatch.setitem(sys.modules, "_eoskafka_test_lazy", types.ModuleType("lazy"))
    assert gcpause.freeze_imports() is True  # a lazy import of a later task
    assert gc.get_freeze_count() >= frozen


def test_objects_made_after_the_freeze_are_still_collected(
        fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    gcpause.freeze_imports()

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # type: ignore[attr-defined]
    del a, b
    assert gc.collect() >= 2  # the cycle a task left is freed by the worker's collection
