"""Where Spark's checkpoint is, read from Spark's own files (invariants 13 and 15)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eos_kafka_source.errors import CheckpointElsewhereError, CheckpointUnreadableError
from eos_kafka_source.sink.handoff import TxnHandoff
from eos_kafka_source.sink.lineage import has_scheme, pyarrow_uri
from eos_kafka_source.sink.spark_checkpoint import (
    CONF_KEY,
    conf_checkpoint,
    refuse_another_query,
    spark_query_id,
)


def _metadata(path: Path, query_id: str) -> None:
    path.mkdir(parents=True)
    (path / "metadata").write_text(json.dumps({"id": query_id}) + "\n")


def _from_task(conf: Path | str) -> TxnHandoff:
    return TxnHandoff("p-0", 1, 0, 2, True, extra={CONF_KEY: str(conf)})


def test_hadoop_one_slash_uris_are_uris_not_relative_paths() -> None:
    """Before: file:/x and dbfs:/x were opened as relative paths under the working dir."""
    assert pyarrow_uri("file:/chk/q") == "file:///chk/q"
    assert pyarrow_uri("dbfs:/chk/q") == "dbfs:///chk/q"
    assert pyarrow_uri("s3a://b/chk") == "s3://b/chk"
    assert pyarrow_uri("/chk/q") == "file:///chk/q"
    assert has_scheme("dbfs:/x") and has_scheme("hdfs://nn/x") and not has_scheme("/x")


def test_a_path_without_spark_metadata_is_elsewhere(tmp_path: Path) -> None:
    with pytest.raises(CheckpointElsewhereError) as refused:
        spark_query_id(str(tmp_path / "chk"))
    message = str(refused.value)
    assert message.startswith("[EOSKAFKA_DECISION_LOG_ELSEWHERE]")
    assert f"file://{tmp_path}/chk" in message and "fs.defaultFS" in message
    with pytest.raises(CheckpointUnreadableError, match="does not exist"):
        spark_query_id(f"file://{tmp_path}/chk")  # a scheme: not resolved elsewhere
    _metadata(tmp_path / "chk", "q-1")
    assert spark_query_id(str(tmp_path / "chk")) == "q-1"


def test_a_conf_checkpoint_is_found_by_name_or_by_its_query_id(tmp_path: Path) -> None:
    """spark.sql.streaming.checkpointLocation: Spark keeps <conf>/<queryName>, or
    <conf>/<a random id> for an unnamed query; the metadata's query id decides."""
    conf = tmp_path / "conf"
    _metadata(conf / "named", "q-named")
    _metadata(conf / "0b9c-random", "q-other")
    _metadata(conf / "7f3e-random", "q-mine")
    tasks = [_from_task(conf)]
    assert conf_checkpoint(tasks, "named", "q-named") == f"{conf}/named"
    assert conf_checkpoint(tasks, None, "q-mine") == f"{conf}/7f3e-random"
    assert conf_checkpoint([TxnHandoff("p-0", 1, 0, 2, True)], None, "q-mine") is None
    with pytest.raises(CheckpointUnreadableError, match="holds query q-named"):
        conf_checkpoint(tasks, "named", "q-mine")
    with pytest.raises(CheckpointUnreadableError, match="no checkpoint under"):
        conf_checkpoint([_from_task(f"file://{conf}")], None, "q-gone")


def test_a_stale_checkpoint_here_while_spark_runs_another_query_is_refused(
        tmp_path: Path) -> None:
    """Metadata left at the path by an earlier local run: the driver reads query q-old, the
    tasks run q-new (Spark's checkpoint is elsewhere). Was a bare lineage conflict."""
    ran = [TxnHandoff("p-0", 1, 0, 2, True, lineage="q-new")]
    refuse_another_query(str(tmp_path), "q-new", ran)  # the same query: fine
    refuse_another_query(str(tmp_path), None, ran)  # not read here: the tasks' id is used
    with pytest.raises(CheckpointElsewhereError, match="names query q-old") as refused:
        refuse_another_query(str(tmp_path), "q-old", ran)
    assert "q-new" in str(refused.value) and "with its scheme" in str(refused.value)
    with pytest.raises(CheckpointUnreadableError, match="names query q-old"):
        refuse_another_query(f"s3://b/{tmp_path.name}", "q-old", ran)


def test_the_cli_opens_a_log_given_as_a_hadoop_uri(tmp_path: Path) -> None:
    """`eoskafka txns --checkpoint file:/x` (Hadoop's form, as Spark prints it) was read as a
    relative path: "no decision log"."""
    from eos_kafka_source.cli import _common as c
    from eos_kafka_source.sink.decisions.log import DecisionLog

    DecisionLog(str(tmp_path))
    assert c.open_decision_log(f"file:{tmp_path}").location == f"file:{tmp_path}/eoskafka"
