"""formats/options.py: valueFormat/keyFormat and the schema options, parsed at the edge."""

from __future__ import annotations

import pickle

import pytest

from eos_kafka_source.errors import ConfigError
from eos_kafka_source.options import SinkOptions, SourceOptions

BOOT = {"kafka.bootstrap.servers": "b:9092"}
REG = {"schema.registry.url": "http://registry:8081"}


def read(**options: str) -> SourceOptions:
    return SourceOptions.parse({**BOOT, "subscribe": "t", **options}, streaming=True)


def write(**options: str) -> SinkOptions:
    return SinkOptions.parse({**BOOT, "topic": "out", **options})


def refused(parse, needle: str, **options: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse(**options)
    assert needle in str(info.value), info.value
    return str(info.value)


def test_raw_is_the_default_and_carries_no_formats() -> None:
    assert read().formats is None and write().formats is None


@pytest.mark.parametrize("parse", [read, write], ids=["source", "sink"])
def test_a_format_needs_the_registry(parse) -> None:
    refused(parse, "schema.registry.url", valueFormat="avro")
    refused(parse, "schema.registry.url", keyFormat="json")


@pytest.mark.parametrize("parse", [read, write], ids=["source", "sink"])
def test_registry_options_with_raw_formats_are_refused(parse) -> None:
    refused(parse, "schema.registry.url only applies with valueFormat or keyFormat", **REG)


@pytest.mark.parametrize("parse", [read, write], ids=["source", "sink"])
def test_an_unknown_format_is_refused(parse) -> None:
    refused(parse, "valueFormat must be one of raw, avro, protobuf, json", valueFormat="xml")


@pytest.mark.parametrize(("options", "needle"), [
    ({"mode": "PERMISSIVE"}, "mode only applies"),
    ({"includeSchemaId": "true"}, "includeSchemaId only applies"),
    ({"valueSubject": "s"}, "valueSubject only applies with valueFormat"),
    ({"valueFormat": "avro", "keySchemaId": "3", **REG}, "keySchemaId only applies with keyFormat"),
], ids=["mode", "includeSchemaId", "subject", "raw key"])
def test_source_options_that_would_do_nothing_are_refused(options, needle) -> None:
    refused(read, needle, **options)


@pytest.mark.parametrize(("options", "needle"), [
    ({"auto.register.schemas": "false"}, "auto.register.schemas only applies"),
    ({"recordName": "R"}, "recordName only applies"),
    ({"value.subject.name.strategy": "RecordNameStrategy"}, "only applies with valueFormat"),
], ids=["auto.register", "recordName", "strategy"])
def test_sink_options_that_would_do_nothing_are_refused(options, needle) -> None:
    refused(write, needle, **options)


def test_source_schema_options_are_not_sink_options() -> None:
    refused(write, "unknown option", valueFormat="avro", valueSchemaVersion="2", **REG)
    refused(read, "unknown option", valueFormat="avro", **{"auto.register.schemas": "true"},
            **REG)


def test_one_way_to_choose_the_reader_schema() -> None:
    refused(read, "valueSchemaVersion and valueSchemaId both choose", valueFormat="avro",
            valueSchemaVersion="2", valueSchemaId="7", **REG)
    refused(read, "valueSubject names where a version is looked up", valueFormat="avro",
            valueSubject="s", valueSchemaId="7", **REG)
    refused(read, "valueSchemaId must be a positive integer", valueFormat="avro",
            valueSchemaId="seven", **REG)


def test_several_topics_need_a_subject_id_or_text() -> None:
    with pytest.raises(ConfigError, match="several topics"):
        SourceOptions.parse({**BOOT, "subscribe": "a,b", "valueFormat": "avro", **REG},
                            streaming=True)
    with pytest.raises(ConfigError, match="a topic pattern"):
        SourceOptions.parse({**BOOT, "subscribePattern": "a.*", "valueFormat": "avro", **REG},
                            streaming=True)


def test_mode_names_are_spark_from_avro_names() -> None:
    refused(read, "mode must be FAILFAST or PERMISSIVE", valueFormat="avro", mode="lenient",
            **REG)


def test_use_latest_version_needs_auto_register_off() -> None:
    refused(write, "auto.register.schemas=false", valueFormat="avro",
            **{"use.latest.version": "true"}, **REG)


def test_a_strategy_is_a_short_or_a_confluent_class_name() -> None:
    refused(write, "value.subject.name.strategy must be", valueFormat="avro",
            **{"value.subject.name.strategy": "ByTopic"}, **REG)


# -- parsed ---------------------------------------------------------------------------------

def test_the_subject_defaults_to_the_topic_and_all_is_picklable() -> None:
    opts = read(valueFormat="AVRO", keyFormat="json", includeSchemaId="true",
                mode="permissive", keySchemaVersion="3", **REG)
    fmt = opts.formats
    assert fmt is not None and fmt.value is not None and fmt.key is not None
    assert (fmt.value.format, fmt.value.subject, fmt.value.version) == ("avro", "t-value", None)
    assert (fmt.key.format, fmt.key.subject, fmt.key.version) == ("json", "t-key", 3)
    assert fmt.mode == "PERMISSIVE" and fmt.include_schema_id
    assert pickle.loads(pickle.dumps(opts)) == opts


def test_reader_schema_by_id_or_text_has_no_subject() -> None:
    fmt = read(valueFormat="protobuf", valueSchemaId="12", **REG).formats
    assert fmt is not None and fmt.value is not None
    assert (fmt.value.subject, fmt.value.schema_id) == (None, 12)
    fmt = read(valueFormat="json", valueSchema='{"type":"object"}', **REG).formats
    assert fmt is not None and fmt.value is not None and fmt.value.text == '{"type":"object"}'


def test_sink_subjects_follow_the_strategy() -> None:
    fmt = write(valueFormat="avro", keyFormat="avro", recordName="Order",
                recordNamespace="shop", **REG,
                **{"value.subject.name.strategy":
                   "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"}).formats
    assert fmt is not None and fmt.value is not None and fmt.key is not None
    assert fmt.auto_register and not fmt.use_latest
    assert (fmt.record_name, fmt.record_namespace) == ("Order", "shop")
    assert fmt.value.subject_for("out", "shop.Order") == "out-shop.Order"
    assert fmt.key.subject_for("out", "shop.Order") == "out-key"
    assert fmt.key.subject_for(None, "shop.Order") is None
    fmt = write(valueFormat="avro", valueSubject="fixed", **REG,
                **{"auto.register.schemas": "false", "use.latest.version": "true"}).formats
    assert fmt is not None and fmt.value is not None
    assert fmt.value.subject_for(None, "x") == "fixed" and fmt.use_latest


def test_a_message_name_is_protobufs_alone() -> None:
    refused(read, "valueMessageName only applies with valueFormat=protobuf",
            valueFormat="avro", valueMessageName="Order", **REG)
    fmt = read(valueFormat="protobuf", valueMessageName="shop.Order", **REG).formats
    assert fmt is not None and fmt.value is not None and fmt.value.message == "shop.Order"
