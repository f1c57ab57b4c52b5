"""The task-slot rule the source packs a batch's ranges by when ``maxPartitions`` is not set
(eos_kafka_source/source/slots.py, packing.bins_for)."""

from __future__ import annotations

import logging

import pytest

from eos_kafka_source.source import slots
from eos_kafka_source.source.packing import bins_for
from eos_kafka_source.source.slots import defaults_conf, slots_from_conf, submit_conf


@pytest.mark.parametrize(("conf", "expected"), [
    ({"spark.master": "local"}, 1),
    ({"spark.master": "local[2]"}, 2),
    ({"spark.master": "local[2,3]"}, 2),        # N threads, F max failures
    ({"spark.master": "local[*]"}, 8),          # the driver machine's cores (8 here)
    ({"spark.master": "local[*, 4]"}, 8),
    ({"spark.master": "local-cluster[2,3,1024]"}, 6),
    ({"spark.master": "local[4]", "spark.task.cpus": "2"}, 2),
    ({"spark.master": "local[1]", "spark.task.cpus": "2"}, 1),  # never below one
    ({"spark.master": "local[2]", "spark.default.parallelism": "6"}, 6),  # set: it wins
    ({"spark.master": "yarn", "spark.executor.instances": "3",
      "spark.executor.cores": "4"}, 12),
    ({"spark.master": "k8s://x", "spark.executor.instances": "3", "spark.executor.cores": "4",
      "spark.task.cpus": "2"}, 6),
])
def test_slots_from_known_settings(conf: dict[str, str], expected: int) -> None:
    assert slots_from_conf(conf, cpus=8) == expected


@pytest.mark.parametrize("conf", [
    {},                                                   # nothing seen
    {"spark.master": "yarn"},                             # executors sized elsewhere
    {"spark.master": "spark://h:7077", "spark.executor.cores": "2"},
    {"spark.master": "yarn", "spark.executor.instances": "3", "spark.executor.cores": "4",
     "spark.dynamicAllocation.enabled": "true"},          # executors come and go
    {"spark.master": "local[0]"},
    {"spark.master": "local[x]"},
    {"spark.default.parallelism": "-1"},
])
def test_slots_unknown(conf: dict[str, str]) -> None:
    assert slots_from_conf(conf, cpus=8) is None


def test_submit_conf_reads_what_spark_submit_sets() -> None:
    argv = ["/usr/bin/java", "-cp", "jars/*", "-Xmx1g", "-Dspark.task.cpus=1",
            "org.apache.spark.deploy.SparkSubmit", "--master", "yarn", "--num-executors", "3",
            "--executor-cores", "2", "--conf", "spark.default.parallelism=5",
            "-c", "spark.task.cpus=2", "--conf=spark.app.name=x", "pyspark-shell"]
    assert submit_conf(argv) == {
        "spark.task.cpus": "2", "spark.master": "yarn", "spark.executor.instances": "3",
        "spark.executor.cores": "2", "spark.default.parallelism": "5", "spark.app.name": "x"}


def test_spark_defaults_file() -> None:
    text = ("# comment\n\nspark.master   local[3]\nspark.task.cpus=1\n"
            "spark.executor.cores: 2\nnot.spark 1\n")
    assert defaults_conf(text) == {"spark.master": "local[3]", "spark.task.cpus": "1",
                                   "spark.executor.cores": "2"}


def test_bins_max_partitions_overrides_min_partitions_is_a_floor() -> None:
    assert bins_for(None, None, 2) == 2          # the default: the task slots
    assert bins_for(3, None, 2) == 3             # maxPartitions overrides
    assert bins_for(1, None, None) == 1
    assert bins_for(None, 7, 2) == 7             # minPartitions: never fewer partitions
    assert bins_for(None, 1, 2) == 2
    assert bins_for(None, None, None) is None    # unknown: a task per range, as Spark's


def test_unknown_slots_fall_back_and_say_so_once(monkeypatch, caplog) -> None:
    monkeypatch.setattr(slots, "_active_context_slots", lambda: None)
    monkeypatch.setattr(slots, "_visible_conf", lambda: ({"spark.master": "yarn"}, "nothing"))
    slots.task_slots.cache_clear()
    try:
        with caplog.at_level(logging.INFO, logger="eos_kafka_source.source.slots"):
            assert slots.task_slots() is None
            assert slots.task_slots() is None
        said = [r for r in caplog.records if "maxPartitions" in r.getMessage()]
        assert len(said) == 1 and said[0].levelno == logging.INFO
    finally:
        slots.task_slots.cache_clear()


def test_this_process_ancestors_are_read_without_failing() -> None:
    """Under pytest no driver JVM is an ancestor: nothing found, no error."""
    assert slots._driver_argv() is None
