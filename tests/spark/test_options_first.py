"""A bad option is the first error a user reads: at ``load()`` and ``save()``, and at a
stream write's first batch, before any task (Spark runs no sink code before ``start()``
returns).

Spark asks a Python data source for its schema when a read is loaded, before it analyses
what the user does with the columns: checked only when the reader ran,
``option("valueFormat", "avro").load().select("value.id")`` without a registry failed first
with Spark's ``INVALID_EXTRACT_BASE_FIELD_TYPE`` (``value`` is binary). No broker is needed: nothing
may get as far as connecting. Spark Connect: tests/deploy/test_connect.py.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.smoke]

NOWHERE = "127.0.0.1:9"  # never dialled: the options are refused first


def head(exc: BaseException, lines: int = 4) -> str:
    """The first lines of the error a user reads."""
    return "\n".join(str(exc).strip().splitlines()[:lines])


def read(spark, streaming: bool, **options: str):
    r = (spark.readStream if streaming else spark.read).format("eoskafka")
    r = r.option("kafka.bootstrap.servers", NOWHERE).option("subscribe", "t")
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "stream"])
def test_bad_read_option_fails_load_before_the_columns_are_analysed(spark, streaming) -> None:
    with pytest.raises(Exception) as info:
        read(spark, streaming, valueFormat="avro").select("value.id")
    text = head(info.value)
    assert "EOSKAFKA_INVALID_OPTION" in text and "schema.registry.url" in text, text
    assert "INVALID_EXTRACT_BASE_FIELD_TYPE" not in str(info.value)


@pytest.mark.parametrize(("streaming", "typo", "meant"), [
    (False, "subscribee", "subscribe"),
    (True, "maxOffsetPerTrigger", "maxOffsetsPerTrigger"),
], ids=["batch", "stream"])
def test_mistyped_read_option_names_the_fix_at_load(spark, streaming, typo, meant) -> None:
    with pytest.raises(Exception) as info:
        read(spark, streaming, **{typo: "5"})
    text = head(info.value)
    assert "EOSKAFKA_INVALID_OPTION" in text and f"did you mean '{meant}'" in text, text


def test_bad_read_value_fails_load(spark) -> None:
    """Values too, where every kind of read refuses them."""
    with pytest.raises(Exception) as info:
        read(spark, True, maxOffsetsPerTrigger="lots")
    text = head(info.value)
    assert "EOSKAFKA_INVALID_OPTION" in text and "maxOffsetsPerTrigger" in text, text


def test_mistyped_batch_write_option_fails_save(spark) -> None:
    df = spark.range(3).selectExpr("CAST(id AS STRING) AS value")
    with pytest.raises(Exception) as info:
        (df.write.format("eoskafka").mode("append").option("kafka.bootstrap.servers", NOWHERE)
         .option("topic", "out").option("transactionalIdPrefx", "app").save())
    text = head(info.value)
    assert "EOSKAFKA_INVALID_OPTION" in text, text
    assert "did you mean 'transactionalIdPrefix'" in text, text


def test_mistyped_stream_write_option_fails_the_first_batch_before_any_task(
    spark, tmp_path
) -> None:
    """Spark 4.x runs none of a sink's Python before ``start()`` returns (no schema call
    for a write: measured on 4.3.0), so the query fails at its first batch's planning,
    before any task, with our condition as the first thing its exception says."""
    df = spark.readStream.format("rate").load().selectExpr("CAST(value AS STRING) AS value")
    query = (df.writeStream.format("eoskafka").option("kafka.bootstrap.servers", NOWHERE)
             .option("topic", "out").option("checkpointLocation", str(tmp_path / "chk"))
             .option("transactionalIdPrefx", "app").start())
    try:
        with pytest.raises(Exception) as info:
            query.awaitTermination(120)
    finally:
        query.stop()
    text = head(info.value, 6)
    assert "EOSKAFKA_INVALID_OPTION" in text, text
    assert "did you mean 'transactionalIdPrefix'" in text, text
    assert not query.recentProgress, "a batch completed before the refusal"


def test_a_write_is_not_refused_for_lacking_a_subscription(spark, tmp_path) -> None:
    """The schema call cannot tell a read from a write: a valid write's options pass it."""
    df = spark.readStream.format("rate").load().selectExpr("CAST(value AS STRING) AS value")
    query = (df.writeStream.format("eoskafka").option("kafka.bootstrap.servers", NOWHERE)
             .option("topic", "out").option("checkpointLocation", str(tmp_path / "chk"))
             .option("transactionalIdPrefix", "app").option("delivery.guarantee", "exactly_once")
             .start())
    query.stop()
