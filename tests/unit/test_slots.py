"""The task-slot rule the source packs a batch's ranges by when ``maxPartitions`` is not set
(eos_kafka_source/source/slots.py, packing.bins_for)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from eos_kafka_source.source import slots
from eos_kafka_source.source.packing import bins_for
from eos_kafka_source.source.slots import defaults_conf, slots_from_conf, submit_conf

SA = "spark://h:7077"


@pytest.mark.parametrize(("conf", "expected"), [
    # local
    ({"spark.master": "local"}, 1),
    ({"spark.master": "local[2]"}, 2),
    ({"spark.master": "local[2,3]"}, 2),        # N threads, F max failures
    ({"spark.master": "local[*]"}, 8),          # the driver machine's cores (8 here)
    ({"spark.master": "local[*, 4]"}, 8),
    ({"spark.master": "local[4]", "spark.task.cpus": "2"}, 2),
    ({"spark.master": "local[1]", "spark.task.cpus": "2"}, 1),  # never below one
    ({"spark.master": "local[2]", "spark.default.parallelism": "6"}, 6),  # set: it wins
    # local-cluster[workers, cores each, memory]: a standalone cluster of known size
    ({"spark.master": "local-cluster[2,3,1024]"}, 6),
    ({"spark.master": "local-cluster[2,3,1024]", "spark.cores.max": "4"}, 4),
    ({"spark.master": "local-cluster[2,3,1024]", "spark.cores.max": "4",
      "spark.executor.cores": "3"}, 3),                         # whole executors only
    # standalone: --total-executor-cores (spark.cores.max), in executors of --executor-cores
    ({"spark.master": SA, "spark.cores.max": "2", "spark.executor.cores": "1"}, 2),
    ({"spark.master": SA, "spark.cores.max": "6"}, 6),
    ({"spark.master": SA, "spark.cores.max": "5", "spark.executor.cores": "2"}, 4),
    ({"spark.master": SA, "spark.cores.max": "8", "spark.executor.cores": "4",
      "spark.task.cpus": "2"}, 4),
    ({"spark.master": SA, "spark.executor.cores": "2", "spark.dynamicAllocation.enabled": "true",
      "spark.dynamicAllocation.maxExecutors": "3"}, 6),
    ({"spark.master": SA, "spark.cores.max": "4", "spark.executor.cores": "2",
      "spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.maxExecutors": "3"}, 4),
    # YARN: --num-executors (default 2) x --executor-cores (default 1)
    ({"spark.master": "yarn"}, 2),
    ({"spark.master": "yarn", "spark.executor.instances": "3", "spark.executor.cores": "4"}, 12),
    ({"spark.master": "yarn", "spark.executor.cores": "4", "spark.task.cpus": "3"}, 2),
    ({"spark.master": "yarn", "spark.executor.instances": "3", "spark.executor.cores": "4",
      "spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.maxExecutors": "5"},
     20),                                                       # the most it can run at once
    # Kubernetes: the same sizing
    ({"spark.master": "k8s://https://api:6443"}, 2),
    ({"spark.master": "k8s://x", "spark.executor.instances": "3", "spark.executor.cores": "4",
      "spark.task.cpus": "2"}, 6),
    ({"spark.master": "k8s://x", "spark.dynamicAllocation.enabled": "true",
      "spark.dynamicAllocation.maxExecutors": "4"}, 4),
])
def test_slots_from_known_settings(conf: dict[str, str], expected: int) -> None:
    assert slots_from_conf(conf, cpus=8) == expected


@pytest.mark.parametrize("conf", [
    {},                                                   # nothing seen
    {"spark.master": "mesos://h:5050"},                   # a master without a rule
    {"spark.master": SA},                                 # executors take every worker's cores
    {"spark.master": SA, "spark.executor.cores": "2"},
    {"spark.master": SA, "spark.cores.max": "1", "spark.executor.cores": "2"},  # no executor
    {"spark.master": "yarn", "spark.executor.instances": "3", "spark.executor.cores": "4",
     "spark.dynamicAllocation.enabled": "true"},          # no maximum: executors come and go
    {"spark.master": "k8s://x", "spark.dynamicAllocation.enabled": "TRUE"},
    {"spark.master": "yarn", "spark.executor.instances": "0"},
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


def test_standalone_submit_reads_total_executor_cores() -> None:
    """spark-submit --total-executor-cores 2 --executor-cores 1 on a standalone master: two
    slots (a driver JVM's command line as spark-submit starts it for a Python job)."""
    argv = ["/usr/bin/java", "-cp", "conf/:jars/*", "-Xmx1g",
            "org.apache.spark.deploy.SparkSubmit", "--master", "spark://127.0.0.1:7077",
            "--total-executor-cores", "2", "--executor-cores", "1", "job.py", "in"]
    assert slots_from_conf(submit_conf(argv)) == 2


def test_spark_connect_server_command_line() -> None:
    """start-connect-server.sh is spark-submit with the Connect server's class."""
    argv = ["java", "-cp", "jars/*", "org.apache.spark.deploy.SparkSubmit", "--master",
            "yarn", "--num-executors", "4", "--executor-cores", "2", "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer", "--name",
            "Spark Connect server", "spark-internal"]
    assert slots_from_conf(submit_conf(argv)) == 8


def test_properties_file_replaces_spark_defaults(tmp_path: Path) -> None:
    """YARN's application master (cluster mode) and a Kubernetes driver pod get their Spark
    settings from a --properties-file, relative to the driver's working directory; it
    replaces spark-defaults.conf unless --load-spark-defaults."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.master yarn\nspark.executor.cores 8\n")
    (tmp_path / "__spark_conf__").mkdir()
    (tmp_path / "__spark_conf__" / "__spark_conf__.properties").write_text(
        "spark.master=yarn\nspark.executor.instances=3\n")
    am = ["java", "org.apache.spark.deploy.yarn.ApplicationMaster", "--class", "x",
          "--properties-file", "__spark_conf__/__spark_conf__.properties"]
    conf, where = slots.conf_of(am, tmp_path, str(conf_dir))
    assert slots_from_conf(conf) == 3 and where[0].startswith("the properties file")
    conf, _ = slots.conf_of([*am, "--load-spark-defaults"], tmp_path, str(conf_dir))
    assert slots_from_conf(conf) == 24
    conf, where = slots.conf_of(None, None, str(conf_dir))   # no driver found: defaults only
    assert slots_from_conf(conf) == 16 and where == ["spark-defaults.conf"]
    conf, where = slots.conf_of(["java", "--properties-file", str(tmp_path / "gone")], None,
                                str(conf_dir))
    assert conf == {} and where == ["the driver JVM's command line"]


def test_unknown_slots_fall_back_and_warn_once(monkeypatch, caplog) -> None:
    monkeypatch.setattr(slots, "_active_context_slots", lambda: None)
    monkeypatch.setattr(slots, "_visible_conf",
                        lambda: ({"spark.master": "spark://h:7077"}, "nothing"))
    slots.task_slots.cache_clear()
    try:
        with caplog.at_level(logging.INFO, logger="eos_kafka_source.source.slots"):
            assert slots.task_slots() is None
            assert slots.task_slots() is None
        said = [r for r in caplog.records if "maxPartitions" in r.getMessage()]
        assert len(said) == 1 and said[0].levelno == logging.WARNING
        assert "'spark://h:7077'" in said[0].getMessage()
    finally:
        slots.task_slots.cache_clear()


def test_the_warning_reaches_stderr_where_no_logging_is_configured() -> None:
    """A Spark Python worker configures no logging: Python's last-resort handler writes
    WARNING and above to stderr (which Spark copies into the driver's log) and drops INFO,
    which is why an INFO line never showed."""
    code = ("import logging; from eos_kafka_source.source import slots; "
            "slots._active_context_slots = lambda: None; "
            "slots._visible_conf = lambda: ({'spark.master': 'spark://h:7077'}, 'nothing'); "
            "slots.task_slots(); slots.task_slots(); "
            "logging.getLogger('eos_kafka_source.source.slots').info('an INFO line')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert proc.stderr.count("maxPartitions") == 1, proc.stderr
    assert "an INFO line" not in proc.stderr


def test_this_process_ancestors_are_read_without_failing() -> None:
    """Under pytest no driver JVM is an ancestor: nothing found, no error."""
    assert slots._driver_argv() is None
