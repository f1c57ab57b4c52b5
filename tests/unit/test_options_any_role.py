"""options/any_role.py: what the schema call refuses before it is known whether the options
are a read's or a write's (the Spark side: tests/spark/test_options_first.py)."""

from __future__ import annotations

import pytest

from eos_kafka_source.errors import ConfigError
from eos_kafka_source.options.any_role import check_any_role

BOOT = {"kafka.bootstrap.servers": "b:9092"}


@pytest.mark.parametrize("options", [
    {"subscribe": "t", "endingOffsets": "latest"},  # a batch read's
    {"subscribe": "t", "maxOffsetsPerTrigger": "5", "startingOffsets": "latest"},  # a stream's
    {"topic": "out", "transactionalIdPrefix": "app", "checkpointLocation": "/chk"},  # a write's
    {},  # a write naming its topic in a column
], ids=["batch read", "stream read", "write", "kafka only"])
def test_valid_options_of_any_role_pass(options: dict[str, str]) -> None:
    check_any_role({**BOOT, **options})


@pytest.mark.parametrize(("options", "needle"), [
    ({"subscribe": "t", "subscribee": "t"}, "did you mean 'subscribe'"),
    ({"subscribe": "t", "valueFormatt": "avro"}, "did you mean 'valueFormat'"),
    ({"subscribe": "t", "valueFormat": "avro"}, "schema.registry.url"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "lots"}, "maxOffsetsPerTrigger"),
    ({"topic": "out", "transactionalIdPrefx": "app"}, "did you mean 'transactionalIdPrefix'"),
    ({"topic": "out", "delivery.guarantee": "twice"}, "delivery.guarantee must be one of"),
    ({"topc": "out"}, "did you mean 'topic'"),
], ids=["read typo", "read unknown", "read no registry", "read value", "write typo",
        "write value", "either"])
def test_what_every_role_refuses_is_refused(options: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_any_role({**BOOT, **options})
    assert needle in str(info.value)


def test_read_options_wrong_for_every_kind_of_read_are_refused() -> None:
    """endingOffsets alone is a batch read's and maxOffsetsPerTrigger alone a stream's (which
    kind a read is, only its reader knows); together they fit neither."""
    with pytest.raises(ConfigError):
        check_any_role({**BOOT, "subscribe": "t", "endingOffsets": "latest",
                        "maxOffsetsPerTrigger": "5"})
