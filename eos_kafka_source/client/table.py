"""Every ``kafka.*`` key, honoured or refused: the one table eoskafka's option parsers and
its option reference (docs/options.md) read.

Spark's Kafka connector passes every ``kafka.*`` option to Kafka's Java clients. eoskafka
runs no Java client, so each key of Kafka's producer, consumer and admin clients (4.4:
:mod:`.kafka_keys`, from their ``ProducerConfig``, ``ConsumerConfig`` and
``AdminClientConfig``) and each of eoskafka's own is one of:

* **honoured**: it does here what it does in Java (``text`` says how), on both sides or on
  the one it belongs to (a producer key on a read is refused, and the reverse);
* **refused**: eoskafka does the thing another way; ``text`` says why and what to use;
* **not applicable**: it tunes a part of the Java client eoskafka does not have; refused
  too, since a setting that silently does nothing misleads.

A key in none of these is unknown, refused with a "did you mean". ``tests/unit/
test_client_table.py`` parses every key: honoured ones change the parsed options, the
others raise :class:`~eos_kafka_source.errors.ConfigError` naming the key and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from .kafka_keys import ADMIN, CONSUMER, OWN, PRODUCER

__all__ = ["ADMIN", "BOTH", "CONSUMER", "HONOURED", "NOT_APPLICABLE", "OWN", "PRODUCER",
           "REFUSED", "SINK", "SOURCE", "TABLE", "Key", "honoured", "other_side"]

HONOURED, REFUSED, NOT_APPLICABLE = "honoured", "refused", "not applicable"
BOTH, SOURCE, SINK = "both", "source", "sink"


@dataclass(frozen=True)
class Key:
    """One ``kafka.*`` key (name without the prefix): what eoskafka does with it."""

    status: str
    #: Honoured: what it does here. Otherwise: why not, and what to use instead.
    text: str
    #: Honoured: its default as users read it in the reference.
    default: str = ""
    #: Honoured on a read (SOURCE), a write (SINK) or both; refused on the other side.
    side: str = BOTH
    #: Where options/reference.py checks the shown default (see its ``Opt.check``).
    check: str | None = None


def _h(text: str, default: str = "", side: str = BOTH, check: str | None = None) -> Key:
    return Key(HONOURED, text, default, side, check)


def _r(text: str) -> Key:
    return Key(REFUSED, text)


def _na(text: str) -> Key:
    return Key(NOT_APPLICABLE, text)


def _each(names: str, key: Key) -> dict[str, Key]:
    return dict.fromkeys(names.split(), key)


_JAVA_CLASS = _r("Java classes cannot run in eoskafka's Python client")
_BYTES = _r("keys and values are always bytes; cast or serialize in a DataFrame instead")
_GROUP = _na("eoskafka's reads join no consumer group: Spark's planning gives each task its "
             "offset range, and the checkpoint keeps the progress")
_METRICS = _na("the Java client's metrics; eoskafka's own figures are in Spark's query "
               "progress and its logs")
_JSSE = _na("a setting of Java's TLS implementation; eoskafka's client uses Python's "
            "OpenSSL and verifies the broker against kafka.ssl.truststore.location")
_METADATA = _na("there is no background metadata to age or recover: eoskafka asks for "
                "metadata when it plans a batch and again when a leader or coordinator "
                "moves, reconnecting from kafka.bootstrap.servers")
_VALIDATOR = _na("a setting of the broker's token validator: a client does not validate the "
                 "token it sends; set it on the broker")
_ASSERTION = _r("the JWT-bearer grant (KIP-1139 assertions) is not supported: use client "
                "credentials (clientId/clientSecret) or kafka.sasl.oauthbearer.token.provider")
_KINIT = _na("eoskafka's client has no login thread to tune: MIT Kerberos gets a new ticket "
             "from the keytab when one expires")
_BACKOFF = _na("retries back off on eoskafka's own schedule (50 ms doubling to 1 s) within "
               "the operation's deadline: bound them with kafka.default.api.timeout.ms, "
               "kafka.delivery.timeout.ms or kafka.max.block.ms")
_PARTITIONER = _r("partitions come from the partition column, else the key's murmur2 hash "
                  "(Java's default) or round robin: set a partition column to choose")
_FETCH_WAIT = _na("a task fetches only offsets the planner saw below the last stable offset, "
                  "so the broker answers at once; kafkaConsumer.pollTimeoutMs bounds the wait")
_PEM = "**PEM**"

TABLE: dict[str, Key] = {
    # -- where the brokers are, who this client is, deadlines ---------------------------
    "bootstrap.servers": _h("`host:port[,host:port]`", "required"),
    "client.id": _h("the client id in every request", "`eoskafka`",
                    check="stream:client.client_id"),
    "request.timeout.ms": _h("how long one request waits for its answer", "30000",
                             check="stream:client.request_timeout_ms"),
    "socket.connection.setup.timeout.ms": _h(
        "how long a connection may take; an unreachable broker fails with "
        "`EOSKAFKA_BROKER_UNREACHABLE` after it", "10000",
        check="stream:client.connect_timeout_ms"),
    "default.api.timeout.ms": _h(
        "the deadline of each driver-side or metadata operation, retries included",
        "60000 (1 min)",
        check="stream:client.api_timeout_ms"),
    "connections.max.idle.ms": _h("a connection unused this long is closed (the next "
                                  "request reconnects)", "540000 (9 min)",
                                  check="stream:client.connections_max_idle_ms"),
    # -- sign-in --------------------------------------------------------------------------
    "security.protocol": _h("`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`", "`PLAINTEXT`",
                            check="stream:client.security_protocol"),
    "sasl.mechanism": _h(
        "`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER`, `GSSAPI` (Kerberos with a "
        "keytab: [security](security.md#kerberos-gssapi))", "none (`PLAIN` with a "
        "PlainLoginModule line, `OAUTHBEARER` with an OAuthBearerLoginModule line, `GSSAPI` "
        "with a Krb5LoginModule line)"),
    "sasl.jaas.config": _h(
        "a Plain, Scram, OAuthBearer or Krb5 login module line, as in Spark's Kafka source "
        "([security](security.md#sign-ins)); hidden everywhere"),
    "sasl.username": _h("eoskafka's own: with `kafka.sasl.password`, instead of a JAAS line"),
    "sasl.password": _h("hidden everywhere"),
    "sasl.kerberos.service.name": _h("GSSAPI, required: the first part of the brokers' "
                                     "Kerberos principal (`kafka` for `kafka/HOST@REALM`)"),
    "sasl.kerberos.krb5.conf": _h(
        "GSSAPI, eoskafka's own: krb5.conf's path on the driver and every executor",
        "`KRB5_CONFIG`, else `/etc/krb5.conf`"),
    "sasl.oauthbearer.token.endpoint.url": _h("OAUTHBEARER: the identity provider's token "
                                              "endpoint (OIDC client credentials)"),
    "sasl.login.callback.handler.class": _h("OAUTHBEARER: Kafka's "
                                            "`OAuthBearerLoginCallbackHandler` (either "
                                            "package name); other Java classes are refused"),
    "sasl.oauthbearer.token.provider": _h(
        "OAUTHBEARER, eoskafka's own: `module:callable` returning `(token, expires_at)`, for "
        "AWS MSK IAM, Azure, GCP or any other source "
        "([security](security.md#a-python-token-provider))"),
    "sasl.oauthbearer.client.credentials.client.id": _h("the client id outside the JAAS "
                                                        "line (KIP-1139)"),
    "sasl.oauthbearer.client.credentials.client.secret": _h("its secret (hidden)"),
    "sasl.oauthbearer.scope": _h("the scope asked for"),
    "sasl.login.refresh.window.factor": _h("a token is refreshed after this share of its "
                                           "lifetime ...", "0.8"),
    "sasl.login.refresh.buffer.seconds": _h("... or this long before it expires, whichever "
                                            "is first ...", "300"),
    "sasl.login.refresh.min.period.seconds": _h("... but not sooner than this after it was "
                                                "fetched (unless the token lives shorter)",
                                                "60"),
    "sasl.login.connect.timeout.ms": _h("a token request's socket timeout is the larger of "
                                        "this and `kafka.sasl.login.read.timeout.ms` (urllib "
                                        "has one timeout for both)", "10000"),
    "sasl.login.read.timeout.ms": _h("how long a token request may wait for its answer",
                                     "10000"),
    "sasl.login.retry.backoff.ms": _h("after a failed token request, the wait before the "
                                      "next, doubling (with jitter) ...", "100"),
    "sasl.login.retry.backoff.max.ms": _h("... up to this; meanwhile the cached token signs "
                                          "in until it expires", "10000"),
    # -- TLS ------------------------------------------------------------------------------
    "ssl.truststore.location": _h(f"the CA certificate(s) of the brokers, {_PEM}"),
    "ssl.ca.location": _h("the same, under librdkafka's name"),
    "ssl.truststore.type": _h("`JKS`/`PKCS12` are refused with the command that converts "
                              "the store", "`PEM`"),
    "ssl.keystore.location": _h(f"a client certificate, {_PEM} (with its key, or "
                                "`kafka.ssl.key.location`)"),
    "ssl.certificate.location": _h("the same, under librdkafka's name"),
    "ssl.keystore.type": _h("as `kafka.ssl.truststore.type`", "`PEM`"),
    "ssl.key.location": _h(f"the client key, {_PEM}"),
    "ssl.key.password": _h("the client key's password (hidden)"),
    "ssl.keystore.password": _h("used as the key's password when `kafka.ssl.key.password` "
                                "is not set (hidden)"),
    "ssl.endpoint.identification.algorithm": _h("`https`: the broker's host name must be in "
                                                "its certificate; empty: not checked",
                                                "`https`"),
    "ssl.enabled.protocols": _h("the TLS versions a connection may use, `TLSv1.2` and/or "
                                "`TLSv1.3`; a broker offering none of them fails the "
                                "handshake", "`TLSv1.2,TLSv1.3`"),
    "ssl.protocol": _h("the highest TLS version tried, as in Java: `TLSv1.2` keeps "
                       "connections off TLS 1.3; `TLS` or `TLSv1.3`: no cap", "`TLSv1.3`"),
    "ssl.cipher.suites": _h(
        "the cipher suites offered, IANA or OpenSSL names; TLS 1.3's all or none",
        "OpenSSL's defaults"),
    "ssl.truststore.password": _r("a PEM trust store has no password (Kafka's Java client "
                                  "refuses one too)"),
    "ssl.truststore.certificates": _r("inline certificates are not supported; write them to "
                                      "a PEM file and set kafka.ssl.truststore.location"),
    "ssl.keystore.certificate.chain": _r("inline certificates are not supported; write them "
                                         "to a PEM file and set "
                                         "kafka.ssl.certificate.location"),
    "ssl.keystore.key": _r("inline keys are not supported; write the key to a PEM file and "
                           "set kafka.ssl.key.location"),
    **_each("ssl.keymanager.algorithm ssl.trustmanager.algorithm ssl.provider "
            "ssl.secure.random.implementation security.providers", _JSSE),
    "ssl.engine.factory.class": _JAVA_CLASS,
    # -- the source -----------------------------------------------------------------------
    "isolation.level": _h("or `read_uncommitted` (Spark's default)", "`read_committed`",
                          SOURCE),
    "group.id": _h("streaming reads: each committed batch's end offsets are committed to "
                   "this group, for Kafka's lag tools ([notes](#notes-on-reading))", "none",
                   SOURCE, "stream:progress_group"),
    "max.partition.fetch.bytes": _h("bytes per partition fetch, as `fetchMaxBytes` (set one "
                                    "of the two)", "8388608 (8 MiB)", SOURCE,
                                    "stream:fetch_max_bytes"),
    "enable.auto.commit": _r("eoskafka keeps its progress in the Spark checkpoint, not in "
                             "consumer-group offsets"),
    "auto.offset.reset": _r("use startingOffsets to choose where a new query starts (and "
                            "failOnDataLoss for offsets that disappear)"),
    "auto.commit.interval.ms": _r("eoskafka keeps its progress in the Spark checkpoint; with "
                                  "kafka.group.id a streaming read commits each batch's end "
                                  "offsets once Spark committed it"),
    **_each("group.instance.id group.protocol group.remote.assignor heartbeat.interval.ms "
            "max.poll.interval.ms partition.assignment.strategy session.timeout.ms "
            "share.acknowledgement.mode share.acquire.mode", _GROUP),
    "max.poll.records": _na("there is no poll loop: a task reads its offset range; size "
                            "tasks with maxRecordsPerPartition and batches with "
                            "maxOffsetsPerTrigger"),
    "fetch.max.bytes": _r("a fetch asks for each partition separately: use fetchMaxBytes "
                          "(or kafka.max.partition.fetch.bytes) for its bytes"),
    "fetch.min.bytes": _FETCH_WAIT,
    "fetch.max.wait.ms": _FETCH_WAIT,
    "check.crcs": _h("`true`: each record batch's CRC-32C is verified as it is read; a "
                     "corrupt batch fails the task (`EOSKAFKA_CORRUPT_RECORD`)",
                     "`false` (Java: `true`)", SOURCE, "stream:check_crcs"),
    "allow.auto.create.topics": _r("a read never creates a topic: create it first "
                                   "(kafka-topics.sh --create)"),
    "exclude.internal.topics": _na("internal topics (`__consumer_offsets`, "
                                   "`__transaction_state`) never match a subscription, as "
                                   "with Java's default"),
    "client.rack": _r("fetching from the nearest replica (KIP-392) is not implemented: every "
                      "read fetches from the partition's leader; remove it"),
    "key.deserializer": _BYTES, "value.deserializer": _BYTES,
    "interceptor.classes": _r("Java interceptors cannot run in eoskafka's Python client"),
    # -- the sink -------------------------------------------------------------------------
    "transaction.timeout.ms": _h(
        "at most 3600000 and the broker's `transaction.max.timeout.ms` "
        "([sizing](operations.md#sizing-the-transaction-timeout))",
        "900000 (15 min)", SINK, "sink:transaction_timeout_ms"),
    "acks": _h("only `all` (or `-1`) is accepted", "`all`", SINK),
    "enable.idempotence": _h("`false` is refused", "`true`", SINK),
    "compression.type": _h("`gzip`, `snappy`, `lz4`, `zstd`, for every produce batch", "`none`",
                           SINK),
    "compression.gzip.level": _h("1-9, as the Java producer (KIP-390); a level for a codec "
                                 "the write does not use is refused", "-1 (zlib's 6)", SINK),
    "compression.lz4.level": _h("1-17: 3-17 other than 9 use lz4 HC", "9 (fast compressor)",
                                SINK),
    "compression.zstd.level": _h("-131072 to 22", "3", SINK),
    "batch.size": _h("cap on a produce batch's bytes (under the brokers' 1 MiB "
                     "`message.max.bytes`); `0`: one record per batch", "900000", SINK,
                     "sink:batch_bytes"),
    "linger.ms": _h("validated; adds no wait (a task batches from the rows it holds)", "0",
                    SINK),
    "max.request.size": _h("cap on a Produce request's bytes", "1048576", SINK,
                           "const:eos_kafka_source.sink.task.writer:_MAX_REQUEST_SIZE"),
    "max.in.flight.requests.per.connection": _h(
        "Produce requests in flight per leader, 1-5 (the idempotent producer's limit)", "5",
        SINK, "const:eos_kafka_source.sink.task.writer:_MAX_IN_FLIGHT"),
    "delivery.timeout.ms": _h(
        "how long a task re-sends an unacknowledged Produce batch (a moved or restarting "
        "leader, NOT_ENOUGH_REPLICAS); at least `kafka.request.timeout.ms`", "120000 (2 min)",
        SINK, "sink:client.delivery_timeout_ms"),
    "max.block.ms": _h("the deadline of a task's transactional calls (FindCoordinator, "
                       "InitProducerId, AddPartitionsToTxn)", "60000 (1 min)", SINK,
                       "sink:client.max_block_ms"),
    "transactional.id": _r("eoskafka assigns transactional ids itself; use "
                           "transactionalIdPrefix"),
    "transaction.two.phase.commit.enable": _r(
        "eoskafka runs its own commit across a batch's tasks (the driver commits every "
        "task's transaction); KIP-939's external coordinator is not used"),
    "retries": _r("a Produce batch is re-sent until kafka.delivery.timeout.ms, other "
                  "operations until kafka.default.api.timeout.ms, as Kafka recommends: bound "
                  "retries with those"),
    "buffer.memory": _na("a task encodes batches from the rows it holds: there is no send "
                         "buffer to size (kafka.max.request.size caps a request)"),
    "key.serializer": _BYTES, "value.serializer": _BYTES,
    "partitioner.class": _r("partitions come from the partition column or the key hash"),
    **_each("partitioner.adaptive.partitioning.enable partitioner.availability.timeout.ms "
            "partitioner.ignore.keys partitioner.rack.aware", _PARTITIONER),
    "metadata.max.idle.ms": _METADATA,
    # -- the Java client's machinery ------------------------------------------------------
    **_each("metadata.max.age.ms metadata.recovery.strategy "
            "metadata.recovery.rebootstrap.trigger.ms metadata.cluster.check.enable",
            _METADATA),
    **_each("metric.reporters metrics.num.samples metrics.recording.level "
            "metrics.sample.window.ms enable.metrics.push", _METRICS),
    **_each("retry.backoff.ms retry.backoff.max.ms reconnect.backoff.ms "
            "reconnect.backoff.max.ms", _BACKOFF),
    "socket.connection.setup.timeout.max.ms": _na(
        "every connection attempt is bounded by kafka.socket.connection.setup.timeout.ms; "
        "there is no growing per-attempt timeout"),
    "bootstrap.resolve.timeout.ms": _na("names are resolved as each connection is made, "
                                        "within kafka.socket.connection.setup.timeout.ms"),
    "client.dns.lookup": _h("`use_all_dns_ips` (every address in turn) or "
                            "`resolve_canonical_bootstrap_servers_only`",
                            "`use_all_dns_ips`", check="stream:client.dns_lookup"),
    **_each("receive.buffer.bytes send.buffer.bytes", _na(
        "the operating system's socket buffer sizes apply (Linux: net.core.rmem_default and "
        "net.core.wmem_default)")),
    "bootstrap.controllers": _na("eoskafka talks to brokers only: use "
                                 "kafka.bootstrap.servers"),
    "config.providers": _r("Java config providers cannot run here: resolve the value in "
                           "Python (from your secret store) and pass the option itself"),
    "sasl.client.callback.handler.class": _r("Java callback handlers cannot run in Python"),
    "sasl.login.class": _r("Java login classes cannot run here: OAUTHBEARER tokens come "
                           "from kafka.sasl.oauthbearer.token.endpoint.url or "
                           "kafka.sasl.oauthbearer.token.provider"),
    **_each("sasl.oauthbearer.jwt.retriever.class sasl.oauthbearer.jwt.validator.class",
            _r("Java classes cannot run here: use kafka.sasl.oauthbearer.token.provider "
               "(a Python callable) for tokens from elsewhere")),
    "sasl.oauthbearer.header.urlencode": _h(
        "`true` only: the client id and secret are always URL-encoded (RFC 6749)",
        "`true` (Java: `false`)"),
    "sasl.login.refresh.window.jitter": _na("each process refreshes its own token at the "
                                            "window factor's point: there is no fleet of "
                                            "login threads to spread out"),
    **_each("sasl.oauthbearer.clock.skew.seconds sasl.oauthbearer.expected.audience "
            "sasl.oauthbearer.expected.issuer sasl.oauthbearer.jwks.endpoint.url "
            "sasl.oauthbearer.jwks.endpoint.refresh.ms "
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms "
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms "
            "sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name "
            "sasl.oauthbearer.allow.unverified.audience "
            "sasl.oauthbearer.allow.unverified.issuer", _VALIDATOR),
    **_each("sasl.oauthbearer.assertion.algorithm sasl.oauthbearer.assertion.claim.aud "
            "sasl.oauthbearer.assertion.claim.exp.seconds sasl.oauthbearer.assertion.claim.iss "
            "sasl.oauthbearer.assertion.claim.jti.include "
            "sasl.oauthbearer.assertion.claim.nbf.seconds sasl.oauthbearer.assertion.claim.sub "
            "sasl.oauthbearer.assertion.file sasl.oauthbearer.assertion.private.key.file "
            "sasl.oauthbearer.assertion.private.key.passphrase "
            "sasl.oauthbearer.assertion.template.file", _ASSERTION),
    **_each("sasl.kerberos.kinit.cmd sasl.kerberos.ticket.renew.window.factor "
            "sasl.kerberos.ticket.renew.jitter sasl.kerberos.min.time.before.relogin", _KINIT),
}


def honoured(side: str | None = None) -> dict[str, Key]:
    """The honoured keys, all or those of one ``side`` (BOTH, SOURCE, SINK)."""
    return {name: key for name, key in TABLE.items()
            if key.status == HONOURED and (side is None or key.side == side)}


def other_side(name: str, role: str) -> str | None:
    """Why ``kafka.<name>``, honoured on one side only, is refused on ``role``'s (SOURCE or
    SINK), or None."""
    key = TABLE.get(name)
    if key is None or key.status != HONOURED or key.side in (BOTH, role):
        return None
    if key.side == SINK:
        return "it is a producer setting and a read does not write; set it on the sink"
    return "it is a consumer setting and a write does not read; set it on the source"
