"""Option parsing: every option valid, invalid, unknown and conflicting; secrets hidden."""

from __future__ import annotations

import pickle

import pytest
from kafka import KafkaProducer

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.errors import ConfigError
from eos_kafka_source.offsets import EndingSpec, StartingSpec
from eos_kafka_source.options import SinkOptions, SourceOptions, Subscription, parse_duration_ms
from eos_kafka_source.options.source import DEFAULT_MAX_OFFSETS_PER_TRIGGER, read_bound

BOOT = {"kafka.bootstrap.servers": "b1:9092"}
SECRET = "s3cr3t-Pa55"
JAAS_PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              f'username="alice" password="{SECRET}";')
JAAS_SCRAM = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              f'username="alice" password="{SECRET}";')


def source(streaming: bool = True, **extra: str) -> SourceOptions:
    return SourceOptions.parse({**BOOT, "subscribe": "t", **extra}, streaming=streaming)


def src(options: dict[str, str], streaming: bool = True) -> SourceOptions:
    return SourceOptions.parse({**BOOT, **options}, streaming=streaming)


def sink(**extra: str) -> SinkOptions:
    return SinkOptions.parse({**BOOT, **extra})


def client(**extra: str) -> ClientConfig:
    return ClientConfig.from_options({**BOOT, **extra})


def raises(fn, *needles: str) -> str:
    """Call ``fn``; it must raise ConfigError whose message contains every needle."""
    with pytest.raises(ConfigError) as info:
        fn()
    message = str(info.value)
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message


# ---------------------------------------------------------------------------
# ClientConfig


@pytest.mark.parametrize("value, expected", [
    ("b1:9092", ("b1:9092",)),
    (" b1:9092 , b2:9093,", ("b1:9092", "b2:9093")),
    ("PLAINTEXT://b1:9092", ("b1:9092",)),
    ("[::1]:9092,10.0.0.1:1", ("[::1]:9092", "10.0.0.1:1")),
])
def test_bootstrap_servers_valid(value, expected):
    assert ClientConfig.from_options({"kafka.bootstrap.servers": value}).bootstrap_servers \
        == expected


@pytest.mark.parametrize("options", [
    {}, {"kafka.bootstrap.servers": ""}, {"kafka.bootstrap.servers": " , "},
    {"kafka.bootstrap.servers": "b1"}, {"kafka.bootstrap.servers": "b1:0"},
    {"kafka.bootstrap.servers": "b1:70000"}, {"kafka.bootstrap.servers": "b 1:9092"},
    {"kafka.bootstrap.servers": "b1:9092,b2"},
])
def test_bootstrap_servers_invalid(options):
    raises(lambda: ClientConfig.from_options(options), "kafka.bootstrap.servers", "host")


def test_bootstrap_key_case_insensitive():
    assert ClientConfig.from_options({"Kafka.Bootstrap.Servers": "b:1"}).bootstrap_servers \
        == ("b:1",)


def test_same_key_twice_with_different_case_and_value():
    raises(lambda: ClientConfig.from_options({"kafka.bootstrap.servers": "a:1",
                                              "KAFKA.bootstrap.servers": "b:1"}), "twice")


def test_defaults_and_to_kafka_python():
    c = client()
    assert (c.security_protocol, c.client_id, c.request_timeout_ms, c.connect_timeout_ms,
            c.ssl_check_hostname, c.extra) == ("PLAINTEXT", "eoskafka", 30000, 10000, True, ())
    kw = c.to_kafka_python()
    assert kw == {
        "bootstrap_servers": ["b1:9092"], "security_protocol": "PLAINTEXT",
        "ssl_check_hostname": True, "request_timeout_ms": 30000,
        "socket_connection_setup_timeout_ms": 10000, "client_id": "eoskafka",
        "receive_message_max_bytes": 64 * 1024 * 1024, "connections_max_idle_ms": 540_000,
        "client_dns_lookup": "use_all_dns_ips",
    }


def test_to_kafka_python_full_and_filtered():
    c = client(**{"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
                  "kafka.sasl.jaas.config": JAAS_SCRAM, "kafka.ssl.ca.location": "/ca.pem",
                  "kafka.ssl.certificate.location": "/c.pem", "kafka.ssl.key.location": "/k.pem",
                  "kafka.ssl.key.password": "kp", "kafka.request.timeout.ms": "5000",
                  "kafka.socket.connection.setup.timeout.ms": "2000", "kafka.client.id": "me"})
    kw = c.to_kafka_python()
    assert kw["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (kw["sasl_plain_username"], kw["sasl_plain_password"]) == ("alice", SECRET)
    assert (kw["ssl_cafile"], kw["ssl_certfile"], kw["ssl_keyfile"], kw["ssl_password"]) == (
        "/ca.pem", "/c.pem", "/k.pem", "kp")
    assert (kw["request_timeout_ms"], kw["socket_connection_setup_timeout_ms"],
            kw["client_id"]) == (5000, 2000, "me")
    filtered = c.to_kafka_python(KafkaProducer.DEFAULT_CONFIG)
    assert "socket_connection_setup_timeout_ms" not in filtered
    assert set(filtered) <= set(KafkaProducer.DEFAULT_CONFIG)
    assert filtered["sasl_plain_password"] == SECRET


@pytest.mark.parametrize("value, expected", [
    ("plaintext", "PLAINTEXT"), ("SSL", "SSL"), ("ssl", "SSL"),
])
def test_security_protocol(value, expected):
    assert client(**{"kafka.security.protocol": value}).security_protocol == expected


def test_security_protocol_invalid():
    raises(lambda: client(**{"kafka.security.protocol": "TLS"}), "kafka.security.protocol",
           "'TLS'", "SASL_SSL")


@pytest.mark.parametrize("extra, mechanism", [
    ({"kafka.sasl.jaas.config": JAAS_PLAIN}, "PLAIN"),
    ({"kafka.sasl.jaas.config": JAAS_PLAIN, "kafka.sasl.mechanism": "plain"}, "PLAIN"),
    ({"kafka.sasl.jaas.config": JAAS_SCRAM, "kafka.sasl.mechanism": "SCRAM-SHA-256"},
     "SCRAM-SHA-256"),
    ({"kafka.sasl.jaas.config": "kafkashaded." + JAAS_SCRAM,
      "kafka.sasl.mechanism": "SCRAM-SHA-512"}, "SCRAM-SHA-512"),
    ({"kafka.sasl.username": "alice", "kafka.sasl.password": SECRET,
      "kafka.sasl.mechanism": "PLAIN"}, "PLAIN"),
])
def test_sasl_valid(extra, mechanism):
    c = client(**{"kafka.security.protocol": "SASL_SSL", **extra})
    assert (c.sasl_mechanism, c.sasl_username, c.sasl_password) == (mechanism, "alice", SECRET)


def test_jaas_quoting_and_unquoted_values():
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
            '  username=bob  password="a \\"q\\" ; b" ;')
    c = client(**{"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.jaas.config": jaas})
    assert (c.sasl_username, c.sasl_password) == ("bob", 'a "q" ; b')


@pytest.mark.parametrize("extra, needles", [
    ({"kafka.sasl.jaas.config": JAAS_SCRAM}, ["kafka.sasl.mechanism", "SCRAM-SHA-512"]),
    ({"kafka.sasl.jaas.config": JAAS_SCRAM, "kafka.sasl.mechanism": "PLAIN"},
     ["ScramLoginModule", "kafka.sasl.mechanism"]),
    ({"kafka.sasl.jaas.config": JAAS_PLAIN, "kafka.sasl.mechanism": "SCRAM-SHA-256"},
     ["PlainLoginModule", "kafka.sasl.mechanism"]),
    ({"kafka.sasl.jaas.config": JAAS_PLAIN, "kafka.sasl.username": "x"}, ["keep one"]),
    ({"kafka.sasl.username": "alice", "kafka.sasl.mechanism": "PLAIN"},
     ["kafka.sasl.password", "together"]),
    ({"kafka.sasl.mechanism": "PLAIN"}, ["needs credentials", "kafka.sasl.jaas.config"]),
    ({"kafka.sasl.username": "a", "kafka.sasl.password": SECRET}, ["kafka.sasl.mechanism"]),
    ({"kafka.sasl.mechanism": "GSSAPI", "kafka.sasl.jaas.config": JAAS_PLAIN},
     ["PlainLoginModule", "kafka.sasl.mechanism is GSSAPI", "Krb5LoginModule required"]),
    ({"kafka.sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
      "useKeyTab=true;"}, ["Krb5LoginModule", "needs keyTab and principal"]),
    ({"kafka.sasl.jaas.config": f"PlainLoginModule username=alice password={SECRET}"},
     ["could not be parsed", "value hidden"]),
    ({"kafka.sasl.jaas.config": f'x.PlainLoginModule required username="a" password="{SECRET}'},
     ["could not be parsed"]),
    ({"kafka.sasl.jaas.config": f'x.PlainLoginModule required password="{SECRET}";'},
     ["username and password"]),
])
def test_sasl_invalid(extra, needles):
    message = raises(lambda: client(**{"kafka.security.protocol": "SASL_SSL", **extra}),
                     *needles)
    assert SECRET not in message


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
def test_sasl_settings_without_sasl_protocol(protocol):
    message = raises(lambda: client(**{"kafka.security.protocol": protocol,
                                       "kafka.sasl.jaas.config": JAAS_PLAIN}),
                     protocol, "SASL_SSL")
    assert SECRET not in message


def test_ssl_settings():
    c = client(**{"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/t.pem",
                  "kafka.ssl.truststore.type": "pem",
                  "kafka.ssl.keystore.location": "/ks.pem", "kafka.ssl.keystore.type": "PEM",
                  "kafka.ssl.key.password": SECRET,
                  "kafka.ssl.endpoint.identification.algorithm": ""})
    assert (c.ssl_cafile, c.ssl_certfile, c.ssl_keyfile, c.ssl_password,
            c.ssl_check_hostname) == ("/t.pem", "/ks.pem", None, SECRET, False)
    assert SECRET not in repr(c)
    message = raises(lambda: client(**{"kafka.security.protocol": "SSL",
                                       "kafka.ssl.truststore.password": SECRET}),
                     "kafka.ssl.truststore.password", "PEM trust store has no password")
    assert SECRET not in message


def test_ssl_keystore_password_is_fallback_key_password():
    c = client(**{"kafka.security.protocol": "SSL", "kafka.ssl.keystore.location": "/ks.pem",
                  "kafka.ssl.keystore.password": "kp"})
    assert c.ssl_password == "kp"


@pytest.mark.parametrize("value, check", [("https", True), ("HTTPS", True), ("", False)])
def test_endpoint_identification(value, check):
    c = client(**{"kafka.security.protocol": "SSL",
                  "kafka.ssl.endpoint.identification.algorithm": value})
    assert c.ssl_check_hostname is check


@pytest.mark.parametrize("extra, needles", [
    ({"kafka.ssl.truststore.location": "/t.jks"}, ["kafka.ssl.truststore.location", "'/t.jks'",
                                                   "PEM", "keytool"]),
    ({"kafka.ssl.truststore.location": "/t.bin", "kafka.ssl.truststore.type": "JKS"},
     ["JKS key store", "PEM"]),
    ({"kafka.ssl.keystore.location": "/k.p12"}, ["kafka.ssl.keystore.location", "openssl"]),
    ({"kafka.ssl.keystore.location": "/k", "kafka.ssl.keystore.type": "PKCS12"}, ["PKCS12"]),
    ({"kafka.ssl.truststore.location": "/t", "kafka.ssl.truststore.type": "BCFKS"},
     ["kafka.ssl.truststore.type", "PEM"]),
    ({"kafka.ssl.truststore.location": "/a.pem", "kafka.ssl.ca.location": "/b.pem"},
     ["kafka.ssl.ca.location", "keep one"]),
    ({"kafka.ssl.keystore.location": "/a.pem", "kafka.ssl.certificate.location": "/b.pem"},
     ["kafka.ssl.certificate.location", "keep one"]),
    ({"kafka.ssl.endpoint.identification.algorithm": "none"}, ["'none'", "'https'"]),
    ({"kafka.ssl.truststore.certificates": "-----BEGIN"}, ["not supported", "PEM file"]),
])
def test_ssl_invalid(extra, needles):
    raises(lambda: client(**{"kafka.security.protocol": "SSL", **extra}), *needles)


def test_ssl_files_without_ssl_protocol():
    message = raises(lambda: client(**{"kafka.ssl.key.password": SECRET,
                                       "kafka.ssl.key.location": "/k.pem"}),
                     "kafka.security.protocol", "SSL")
    assert SECRET not in message


@pytest.mark.parametrize("key", ["kafka.request.timeout.ms",
                                 "kafka.socket.connection.setup.timeout.ms"])
@pytest.mark.parametrize("value", ["0", "-5", "abc", "1.5"])
def test_client_timeouts_invalid(key, value):
    raises(lambda: client(**{key: value}), key, repr(value))


def test_client_id_empty():
    raises(lambda: client(**{"kafka.client.id": " "}), "kafka.client.id")


def test_writer_keys_kept_in_extra():
    """Only what the task writer reads travels in ``extra``; a Java setting that would do
    nothing is refused (tests/unit/test_client_table.py goes through them all)."""
    c = client(**{"kafka.linger.ms": "5", "kafka.Compression.Type": "lz4",
                  "kafka.max.request.size": "2000000"})
    assert c.extra == (("max.request.size", "2000000"),)
    raises(lambda: client(**{"kafka.max.poll.records": "10"}), "kafka.max.poll.records",
           "maxRecordsPerPartition")


@pytest.mark.parametrize("key, needles", [
    ("kafka.bootstrap.server", ["'kafka.bootstrap.server'",
                                "Did you mean 'kafka.bootstrap.servers'?"]),
    ("kafka.securty.protocol", ["Did you mean 'kafka.security.protocol'?"]),
    ("kafka.sasl.pasword", ["Did you mean 'kafka.sasl.password'?"]),
    ("kafka.zzz", ["'kafka.zzz'", "docs/options.md"]),
])
def test_unknown_kafka_option(key, needles):
    message = raises(lambda: client(**{key: SECRET}), *needles)
    assert SECRET not in message


@pytest.mark.parametrize("key", ["kafka.key.serializer", "kafka.value.serializer",
                                 "kafka.key.deserializer", "kafka.value.deserializer"])
def test_serializers_rejected(key):
    raises(lambda: client(**{key: "x"}), key, "always bytes", "DataFrame")


def test_client_config_redaction_and_pickle():
    c = client(**{"kafka.security.protocol": "SASL_SSL", "kafka.sasl.jaas.config": JAAS_PLAIN,
                  "kafka.ssl.key.password": "keypw", "kafka.ssl.key.location": "/k.pem"})
    for text in (repr(c), str(c), f"{c}"):
        assert SECRET not in text and "keypw" not in text and "LoginModule" not in text
        assert "sasl_password='***'" in text and "ssl_password='***'" in text
    assert pickle.loads(pickle.dumps(c)) == c
    assert "sasl_password=None" in repr(client())


# ---------------------------------------------------------------------------
# SourceOptions


def test_source_defaults_streaming_and_batch():
    s = source()
    assert s.subscription == Subscription("subscribe", topics=("t",))
    assert s.starting == StartingSpec("latest") and s.ending is None
    assert (s.max_offsets_per_trigger, s.min_offsets_per_trigger, s.max_trigger_delay_ms,
            s.min_partitions, s.max_records_per_partition, s.fail_on_data_loss,
            s.include_headers, s.read_committed, s.fetch_max_bytes, s.poll_timeout_ms) == (
        1_000_000, None, 900_000, None, None, True, False, True, 8 * 1024 * 1024, 120_000)
    assert s.default_read_bound
    b = source(streaming=False)
    assert b.starting == StartingSpec("earliest") and b.ending == EndingSpec("latest")
    assert b.max_offsets_per_trigger is None and not b.default_read_bound


def test_streaming_reads_are_bounded_by_default_from_the_transaction_budget():
    """A first batch over a backlog cannot outlive the sink's default transaction timeout:
    1,000,000 offsets, a ninth of 15 minutes at 10,000 records/s; an explicit value wins."""
    assert read_bound() == DEFAULT_MAX_OFFSETS_PER_TRIGGER == 1_000_000
    assert read_bound(60_000) == 66_667 and read_bound(1) == 1
    explicit = source(maxOffsetsPerTrigger="50000000")
    assert explicit.max_offsets_per_trigger == 50_000_000 and not explicit.default_read_bound
    above = source(minOffsetsPerTrigger="2000000")  # the bound never hides the minimum
    assert (above.max_offsets_per_trigger, above.min_offsets_per_trigger) == (2_000_000,) * 2


def test_source_keys_and_values_case_insensitive():
    s = SourceOptions.parse({"KAFKA.BOOTSTRAP.SERVERS": "b:1", "SubScribe": "T1",
                             "startingoffsets": "EARLIEST", "FAILONDATALOSS": "FALSE",
                             "includeHeaders": "True", "kafka.isolation.level":
                             "READ_UNCOMMITTED", "maxOffsetsPerTrigger": "7"}, streaming=True)
    assert s.subscription.topics == ("T1",)  # topic names keep their case
    assert (s.starting.kind, s.fail_on_data_loss, s.include_headers, s.read_committed,
            s.max_offsets_per_trigger) == ("earliest", False, True, False, 7)
    assert not s.default_read_bound


def test_source_repr_and_pickle():
    s = source(**{"kafka.security.protocol": "SASL_SSL", "kafka.sasl.jaas.config": JAAS_PLAIN,
                  "startingOffsets": '{"t":{"0":5}}'})
    assert SECRET not in repr(s) and SECRET not in str(s)
    assert pickle.loads(pickle.dumps(s)) == s


@pytest.mark.parametrize("options, expected", [
    ({"subscribe": " a, b ,a,"}, Subscription("subscribe", topics=("a", "b"))),
    ({"subscribePattern": "ev-.*"}, Subscription("subscribePattern", pattern="ev-.*")),
    ({"assign": '{"b":[1,0],"a":[2]}'},
     Subscription("assign", assigned=(("a", 2), ("b", 0), ("b", 1)))),
])
def test_subscription_valid(options, expected):
    assert src(options).subscription == expected


@pytest.mark.parametrize("options, needles", [
    ({}, ["exactly one of subscribe", "none"]),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, ["subscribe and assign"]),
    ({"subscribe": " , "}, ["subscribe", "no topic"]),
    ({"subscribe": "a b"}, ["subscribe", "'a b'", "topic name"]),
    ({"subscribe": "x" * 250}, ["topic name"]),
    ({"subscribePattern": "ev-("}, ["subscribePattern", "'ev-('", "regular expression"]),
    ({"subscribePattern": ""}, ["subscribePattern", "empty"]),
    ({"assign": "{a:[0]}"}, ["assign", "not valid JSON"]),
    ({"assign": "[]"}, ["assign", "non-empty JSON object"]),
    ({"assign": '{"a":[]}'}, ["assign", "'a'", "[]"]),
    ({"assign": '{"a":[-1]}'}, ["assign", "[-1]"]),
    ({"assign": '{"a":["0"]}'}, ["assign", '["0"]']),
])
def test_subscription_invalid(options, needles):
    raises(lambda: src(options), *needles)


def test_subscription_matches():
    assert Subscription("subscribePattern", pattern="ev-.*").matches("ev-1")
    assert not Subscription("subscribePattern", pattern="ev").matches("ev-1")  # full match
    assert Subscription("assign", assigned=(("a", 0),)).matches("a")
    assert not Subscription("subscribe", topics=("a",)).matches("b")


@pytest.mark.parametrize("options, streaming, expected", [
    ({"startingOffsets": "earliest"}, True, StartingSpec("earliest")),
    ({"startingOffsets": " Latest "}, True, StartingSpec("latest")),
    ({"startingOffsets": '{"t":{"1":-1,"0":-2,"2":7}}'}, True,
     StartingSpec("offsets", per_partition=((("t", 0), -2), (("t", 1), -1), (("t", 2), 7)))),
    ({"startingOffsets": '{"t":{"0":-2}}'}, False,
     StartingSpec("offsets", per_partition=((("t", 0), -2),))),
    ({"startingTimestamp": "1700000000000"}, True,
     StartingSpec("timestamp", timestamp=1700000000000, option="startingTimestamp")),
    ({"startingTimestamp": "5", "startingOffsetsByTimestampStrategy": "LATEST"}, False,
     StartingSpec("timestamp", timestamp=5, on_no_match="latest", option="startingTimestamp")),
    ({"startingOffsetsByTimestamp": '{"t":{"0":1000}}'}, True,
     StartingSpec("timestamps", per_partition=((("t", 0), 1000),),
                  option="startingOffsetsByTimestamp")),
])
def test_starting_valid(options, streaming, expected):
    assert source(streaming, **options).starting == expected


@pytest.mark.parametrize("options, streaming, needles", [
    ({"startingOffsets": "latest"}, False, ["startingOffsets='latest'", "batch", "earliest"]),
    ({"startingOffsets": '{"t":{"0":-1}}'}, False, ["-1", "batch"]),
    ({"startingOffsets": '{"t":{"0":-3}}'}, True, ["startingOffsets", "-3", "t-0"]),
    ({"startingOffsets": "first"}, True, ["startingOffsets", "not valid JSON", "'first'"]),
    ({"startingOffsets": '{"t":{"0":1.5}}'}, True, ["startingOffsets", "1.5", "integer"]),
    ({"startingOffsets": '{"t":{"x":1}}'}, True, ["startingOffsets", "'x'"]),
    ({"startingTimestamp": "-1"}, True, ["startingTimestamp", "'-1'"]),
    ({"startingTimestamp": "yesterday"}, True, ["startingTimestamp", "'yesterday'"]),
    ({"startingOffsetsByTimestamp": '{"t":{"0":-2}}'}, True,
     ["startingOffsetsByTimestamp", "-2", "timestamp"]),
    ({"startingOffsetsByTimestampStrategy": "latest"}, True,
     ["startingOffsetsByTimestampStrategy", "only applies"]),
    ({"startingTimestamp": "1", "startingOffsetsByTimestampStrategy": "skip"}, True,
     ["startingOffsetsByTimestampStrategy", "'skip'", "error, latest"]),
    ({"startingOffsets": '{"other":{"0":1}}'}, True, ["startingOffsets", "other",
                                                      "does not subscribe"]),
])
def test_starting_invalid(options, streaming, needles):
    raises(lambda: source(streaming, **options), *needles)


@pytest.mark.parametrize("options, streaming, kind", [
    ({"startingOffsets": "earliest", "startingTimestamp": "1"}, True, "timestamp"),
    ({"startingOffsets": "latest", "startingTimestamp": "1"}, False, "timestamp"),
    ({"startingTimestamp": "1", "startingOffsetsByTimestamp": '{"t":{"0":1}}'}, True,
     "timestamp"),
    ({"startingOffsets": "latest", "startingOffsetsByTimestamp": '{"t":{"0":1}}'}, True,
     "timestamps"),
])
def test_starting_options_follow_sparks_precedence(options, streaming, kind):
    """Spark resolves startingTimestamp > startingOffsetsByTimestamp > startingOffsets
    (KafkaSourceProvider.getKafkaOffsetRangeLimit); the losers are not even parsed."""
    assert source(streaming, **options).starting.kind == kind


def test_ending_options_follow_sparks_precedence():
    assert source(False, endingOffsets="latest", endingTimestamp="5").ending == EndingSpec(
        "timestamp", timestamp=5, option="endingTimestamp")
    assert source(False, endingOffsets="earliest",
                  endingOffsetsByTimestamp='{"t":{"0":9}}').ending.kind == "timestamps"


def test_starting_json_checked_against_subscription():
    assign = '{"a":[0,1]}'
    assert src({"assign": assign, "startingOffsets": '{"a":{"0":1,"1":2}}'}).starting.kind \
        == "offsets"
    raises(lambda: src({"assign": assign, "startingOffsets": '{"a":{"0":1}}'}),
           "startingOffsets", "assigned partitions", "a-1")
    assert src({"subscribePattern": "a.*", "startingOffsets": '{"ab":{"0":1}}'}).starting.kind \
        == "offsets"
    raises(lambda: src({"subscribePattern": "a.*", "startingOffsets": '{"b":{"0":1}}'}),
           "topic(s) b")


@pytest.mark.parametrize("options, expected", [
    ({}, EndingSpec("latest")),
    ({"endingOffsets": "LATEST"}, EndingSpec("latest")),
    ({"endingOffsets": '{"t":{"0":-1,"1":9}}'},
     EndingSpec("offsets", per_partition=((("t", 0), -1), (("t", 1), 9)))),
    ({"endingTimestamp": "99"}, EndingSpec("timestamp", timestamp=99, option="endingTimestamp")),
    ({"endingOffsetsByTimestamp": '{"t":{"0":99}}'},
     EndingSpec("timestamps", per_partition=((("t", 0), 99),),
                option="endingOffsetsByTimestamp")),
])
def test_ending_valid(options, expected):
    assert source(False, **options).ending == expected


@pytest.mark.parametrize("options, streaming, needles", [
    ({"endingOffsets": "latest"}, True, ["endingOffsets", "batch reads only"]),
    ({"endingTimestamp": "1"}, True, ["endingTimestamp", "batch reads only"]),
    ({"endingOffsetsByTimestamp": '{"t":{"0":1}}'}, True, ["endingOffsetsByTimestamp"]),
    ({"endingOffsets": "earliest"}, False, ["endingOffsets='earliest'", "latest"]),
    ({"endingOffsets": '{"t":{"0":-2}}'}, False, ["endingOffsets", "-2", "t-0"]),
    ({"endingTimestamp": "x"}, False, ["endingTimestamp", "'x'"]),
])
def test_ending_invalid(options, streaming, needles):
    raises(lambda: source(streaming, **options), *needles)


@pytest.mark.parametrize("name, attr", [
    ("maxOffsetsPerTrigger", "max_offsets_per_trigger"),
    ("minOffsetsPerTrigger", "min_offsets_per_trigger"),
    ("minPartitions", "min_partitions"),
    ("maxRecordsPerPartition", "max_records_per_partition"),
    ("kafkaConsumer.pollTimeoutMs", "poll_timeout_ms"),
    ("fetchMaxBytes", "fetch_max_bytes"),
])
def test_positive_int_options(name, attr):
    assert getattr(source(**{name: " 1000 "}), attr) == 1000
    assert getattr(source(**{name.lower(): "5"}), attr) == 5
    for bad in ("0", "-1", "1e3", "ten", ""):
        raises(lambda bad=bad: source(**{name: bad}), name, repr(bad))


def test_fetch_max_bytes_upper_bound():
    assert source(fetchMaxBytes=str(32 * 1024 * 1024)).fetch_max_bytes == 32 * 1024 * 1024
    raises(lambda: source(fetchMaxBytes=str(32 * 1024 * 1024 + 1)), "fetchMaxBytes", "64 MiB")


def test_min_greater_than_max_per_trigger():
    raises(lambda: source(minOffsetsPerTrigger="10", maxOffsetsPerTrigger="5"),
           "minOffsetsPerTrigger (10)", "maxOffsetsPerTrigger (5)")


@pytest.mark.parametrize("name", ["maxOffsetsPerTrigger", "minOffsetsPerTrigger",
                                  "maxTriggerDelay"])
def test_trigger_options_rejected_on_batch(name):
    raises(lambda: source(False, **{name: "10"}), name, "streaming reads only")


@pytest.mark.parametrize("value, ms", [
    ("15m", 900_000), ("30s", 30_000), ("500ms", 500), ("500", 500), ("2h", 7_200_000),
    ("1d", 86_400_000), ("5 MIN", 300_000), ("0s", 0),
])
def test_max_trigger_delay(value, ms):
    assert parse_duration_ms("maxTriggerDelay", value) == ms
    assert source(maxTriggerDelay=value).max_trigger_delay_ms == ms


@pytest.mark.parametrize("value", ["", "15 minutes", "-1s", "1.5s", "m"])
def test_max_trigger_delay_invalid(value):
    raises(lambda: source(maxTriggerDelay=value), "maxTriggerDelay", repr(value), "15m")


@pytest.mark.parametrize("name, attr, default", [
    ("failOnDataLoss", "fail_on_data_loss", True),
    ("includeHeaders", "include_headers", False),
])
def test_bool_options(name, attr, default):
    assert getattr(source(), attr) is default
    assert getattr(source(**{name: "true"}), attr) is True
    assert getattr(source(**{name: "False"}), attr) is False
    raises(lambda: source(**{name: "yes"}), name, "'yes'", "true, false")


@pytest.mark.parametrize("value, committed", [("read_committed", True),
                                              ("read_uncommitted", False)])
def test_isolation_level(value, committed):
    assert source(**{"kafka.isolation.level": value}).read_committed is committed


def test_isolation_level_invalid():
    raises(lambda: source(**{"kafka.isolation.level": "serializable"}),
           "kafka.isolation.level", "'serializable'", "read_committed")


@pytest.mark.parametrize("extra", [
    {"groupIdPrefix": "p"}, {"fetchOffset.numRetries": "3"},
    {"fetchoffset.retryintervalms": "10"},
])
def test_source_accepts_and_ignores_spark_options(extra):
    assert source(**extra) == source()


def test_group_id_names_the_progress_group_of_streaming_reads_only():
    assert source(**{"kafka.group.id": "g"}).progress_group == "g"
    assert source().progress_group is None
    raises(lambda: source(False, **{"kafka.group.id": "g"}), "kafka.group.id",
           "streaming reads only")


@pytest.mark.parametrize("key, needles", [
    ("kafka.enable.auto.commit", ["kafka.enable.auto.commit", "checkpoint"]),
    ("kafka.auto.offset.reset", ["kafka.auto.offset.reset", "use startingOffsets"]),
    ("kafka.acks", ["kafka.acks", "producer setting"]),
    ("kafka.transactional.id", ["kafka.transactional.id", "transactionalIdPrefix"]),
    ("kafka.value.deserializer", ["always bytes"]),
])
def test_source_rejected_kafka_options(key, needles):
    raises(lambda: source(**{key: "x"}), *needles)


@pytest.mark.parametrize("key, hint", [
    ("startingoffset", "startingOffsets"), ("maxOffsetPerTrigger", "maxOffsetsPerTrigger"),
    ("failondatalos", "failOnDataLoss"), ("subscribepatern", "subscribePattern"),
])
def test_source_unknown_option_suggestion(key, hint):
    raises(lambda: source(**{key: "1"}), f"'{key.lower()}'", f"did you mean '{hint}'?",
           "Fix or remove")


@pytest.mark.parametrize("parse", [
    lambda o: SourceOptions.parse({"subscribe": "t", **o}, streaming=True),
    lambda o: SinkOptions.parse({"topic": "t", **o}),
], ids=["source", "sink"])
@pytest.mark.parametrize("key", ["bootstrap.servers", "security.protocol", "Max.Poll.Records"])
def test_a_kafka_setting_without_its_prefix_is_answered_with_it(parse, key):
    """A Kafka client setting given without 'kafka.' gets its 'kafka.' name as the hint,
    and the message stays short: the option page lists the names, not the error."""
    message = raises(lambda: parse({**BOOT, key: "x"}),
                     f"did you mean 'kafka.{key.lower()}'?", "docs/options.md", "Fix or remove")
    assert "maxRecordsPerPartition" not in message and "producer.batchRecords" not in message
    assert len(message) < 400, message


def test_source_unknown_options_all_listed_without_values():
    message = raises(lambda: source(path="/x", zzzz=SECRET), "'path'", "'zzzz'")
    assert SECRET not in message


# ---------------------------------------------------------------------------
# SinkOptions


def test_sink_defaults():
    s = sink()
    assert (s.topic, s.transactional_id_prefix, s.delivery, s.transaction_timeout_ms,
            s.checkpoint_location, s.linger_records, s.exactly_once) == (
        None, None, "exactly_once", 900_000, None, 10_000, True)


def test_sink_values_and_case_insensitivity():
    s = SinkOptions.parse({**BOOT, "TOPIC": "Out", "transactionalidprefix": "app-1.x_y",
                           "Delivery.Guarantee": "EXACTLY_ONCE",
                           "kafka.transaction.timeout.ms": "60000",
                           "checkpointlocation": "s3://b/ck", "producer.batchrecords": "500",
                           "kafka.acks": "ALL", "kafka.enable.idempotence": "true"})
    assert (s.topic, s.transactional_id_prefix, s.delivery, s.transaction_timeout_ms,
            s.checkpoint_location, s.linger_records) == (
        "Out", "app-1.x_y", "exactly_once", 60000, "s3://b/ck", 500)
    assert sink(**{"kafka.acks": "-1"}).delivery == "exactly_once"
    assert sink(**{"delivery.guarantee": "at_least_once"}).exactly_once is False


def test_sink_decision_log_location():
    assert sink(decisionLogLocation="/d", checkpointlocation="/c").checkpoint_location == "/d"
    assert sink(decisionLogLocation="/d").checkpoint_location == "/d"
    raises(lambda: sink(decisionLogLocation=" "), "decisionLogLocation", "empty")


@pytest.mark.parametrize("value", ["1", "900000", "3600000"])
def test_transaction_timeout_valid(value):
    assert sink(**{"kafka.transaction.timeout.ms": value}).transaction_timeout_ms == int(value)


@pytest.mark.parametrize("value", ["0", "-1", "3600001", "15m"])
def test_transaction_timeout_invalid(value):
    raises(lambda: sink(**{"kafka.transaction.timeout.ms": value}),
           "kafka.transaction.timeout.ms", repr(value), "transaction.max.timeout.ms")


@pytest.mark.parametrize("options, needles", [
    ({"topic": "bad topic"}, ["topic", "'bad topic'", "topic name"]),
    ({"transactionalIdPrefix": "a b"}, ["transactionalIdPrefix", "'a b'", "A-Z"]),
    ({"transactionalIdPrefix": ""}, ["transactionalIdPrefix", "''"]),
    ({"transactionalIdPrefix": "x" * 201}, ["transactionalIdPrefix", "1-200"]),
    ({"delivery.guarantee": "exactly-once"}, ["delivery.guarantee", "'exactly-once'",
                                              "exactly_once, at_least_once"]),
    ({"producer.batchRecords": "0"}, ["producer.batchRecords", "'0'"]),
    ({"kafka.acks": "1"}, ["kafka.acks='1'", "acks=all"]),
    ({"kafka.acks": "0"}, ["kafka.acks='0'"]),
    ({"kafka.enable.idempotence": "false"}, ["kafka.enable.idempotence=false"]),
    ({"kafka.enable.idempotence": "maybe"}, ["kafka.enable.idempotence", "'maybe'"]),
    ({"kafka.transactional.id": "t"}, ["assigns transactional ids itself",
                                       "use transactionalIdPrefix"]),
    ({"kafka.isolation.level": "read_committed"}, ["kafka.isolation.level", "consumer setting"]),
    ({"kafka.group.id": "g"}, ["kafka.group.id", "consumer setting"]),
    ({"kafka.key.serializer": "x"}, ["kafka.key.serializer", "always bytes", "DataFrame"]),
    ({"topik": "t"}, ["'topik'", "did you mean 'topic'?"]),
    ({"transactionalIdPrefx": "t"}, ["did you mean 'transactionalIdPrefix'?"]),
    ({"startingOffsets": "earliest"}, ["'startingoffsets'", "sink"]),
    ({"delivery.guarantee": "at_least_once", "transactionalIdPrefix": "p"},
     ["transactionalIdPrefix", "only applies", "exactly_once"]),
    ({"delivery.guarantee": "at_least_once", "kafka.transaction.timeout.ms": "1000"},
     ["kafka.transaction.timeout.ms", "only applies"]),
])
def test_sink_invalid(options, needles):
    raises(lambda: sink(**options), *needles)


def test_sink_repr_pickle_and_secret_errors():
    s = sink(**{"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
                "kafka.sasl.username": "u", "kafka.sasl.password": SECRET})
    assert SECRET not in repr(s) and SECRET not in str(s)
    assert pickle.loads(pickle.dumps(s)) == s
    message = raises(lambda: sink(**{"kafka.sasl.password": SECRET, "kafka.sasl.username": "u",
                                     "kafka.sasl.mechanism": "PLAIN"}), "SASL_SSL")
    assert SECRET not in message


@pytest.mark.parametrize("name, codec", [("none", 0), ("GZIP", 1), ("snappy", 2), ("lz4", 3),
                                         ("zstd", 4)])
def test_sink_honours_compression_type(name, codec):
    assert sink(**{"kafka.compression.type": name}).compression == codec


def test_sink_compression_levels_as_the_java_producer_takes_them():
    """kafka.compression.<codec>.level (KIP-390): the codec in use's level, in Java's range;
    a level for another codec would do nothing, so it is refused."""
    assert sink(**{"kafka.compression.type": "lz4"}).compression_level is None
    assert sink(**{"kafka.compression.type": "lz4",
                   "kafka.compression.lz4.level": "12"}).compression_level == 12
    assert sink(**{"kafka.compression.type": "zstd",
                   "kafka.compression.zstd.level": "-5"}).compression_level == -5
    assert sink(**{"kafka.compression.type": "gzip",
                   "kafka.compression.gzip.level": "-1"}).compression_level is None
    raises(lambda: sink(**{"kafka.compression.type": "gzip",
                           "kafka.compression.lz4.level": "3"}),
           "kafka.compression.lz4.level only applies with kafka.compression.type=lz4",
           "uses gzip")
    raises(lambda: sink(**{"kafka.compression.type": "lz4",
                           "kafka.compression.lz4.level": "18"}), "between 1 and 17")
    raises(lambda: sink(**{"kafka.compression.type": "gzip",
                           "kafka.compression.gzip.level": "0"}), "between 1 and 9")


def test_sink_batching_settings_and_spark_sink_options():
    """kafka.batch.size caps a batch's bytes (0: one record each, as in Java); linger.ms is
    validated (a task never waits); includeHeaders is accepted as Spark's sink accepts it."""
    assert sink().batch_bytes == 900_000
    assert sink(**{"kafka.batch.size": "16384"}).batch_bytes == 16384
    assert sink(**{"kafka.batch.size": "0"}).batch_bytes == 0
    assert sink(**{"kafka.linger.ms": "20", "includeHeaders": "true"}).topic is None
    raises(lambda: sink(**{"kafka.compression.type": "brotli"}), "kafka.compression.type",
           "gzip, snappy, lz4, zstd")
    raises(lambda: sink(**{"kafka.linger.ms": "soon"}), "kafka.linger.ms")
    raises(lambda: sink(**{"kafka.batch.size": "-1"}), "kafka.batch.size")


def test_deadlines_are_kafkas_names_and_defaults():
    """Every retry loop's deadline is a named option mapped from the Java client's,
    with the Java client's default, validated once here."""
    c = client()
    assert (c.request_timeout_ms, c.api_timeout_ms, c.delivery_timeout_ms, c.max_block_ms) \
        == (30000, 60000, 120000, 60000)
    assert c.api_timeout_s == 60.0
    c = client(**{"kafka.default.api.timeout.ms": "90000", "kafka.delivery.timeout.ms": "300000",
                  "kafka.max.block.ms": "45000", "kafka.request.timeout.ms": "20000"})
    assert (c.request_timeout_ms, c.api_timeout_ms, c.delivery_timeout_ms, c.max_block_ms) \
        == (20000, 90000, 300000, 45000)
    assert c.extra == ()  # parsed, not passed through
    for key in ("default.api.timeout.ms", "delivery.timeout.ms", "max.block.ms"):
        for bad in ("soon", "0"):
            raises(lambda k=key, v=bad: client(**{f"kafka.{k}": v}),
                   f"kafka.{key} must be a positive")
    raises(lambda: client(**{"kafka.delivery.timeout.ms": "10000"}),
           "kafka.delivery.timeout.ms (10000) must be at least kafka.request.timeout.ms")
