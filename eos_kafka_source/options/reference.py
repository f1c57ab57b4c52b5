"""The option reference (docs/options.md), generated from the option names the parsers accept.

Each option the source and sink parse carries one line here: its default as shown to users
and what it does. :func:`render` builds the reference tables from these lines and from the
parsers' own name lists and refusal reasons, so the page cannot drift:
``tests/unit/test_docs.py`` fails when an accepted name has no line, a line names an option
no parser accepts, a default shown here differs from the parsed default (``check``), or the
committed page differs from :func:`render`. Runs nowhere at query time.

    python -m eos_kafka_source.options.reference              # print the generated section
    python -m eos_kafka_source.options.reference --write      # rewrite it in docs/options.md
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from ..client_keys import CONNECTION_KEYS, PASSTHROUGH_KEYS, PREFIX, REJECTED
from ..kerberos_config import KERBEROS_PASSTHROUGH
from ..oauth_config import OAUTH_PASSTHROUGH
from ._common import SINK_OPTIONS, SOURCE_IGNORED, SOURCE_OPTIONS
from .sink import _SINK_REFUSED
from .source import _SOURCE_REFUSED

BEGIN, END = "<!-- options:begin -->", "<!-- options:end -->"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "options.md"


@dataclass(frozen=True)
class Opt:
    """One option: ``default`` as users read it; ``check`` names where the parsed default
    lives (``stream:``/``batch:``/``sink:`` + attribute path of the parsed options, or
    ``const:`` + module:attribute), and the test requires its value inside ``default``."""

    name: str
    default: str
    meaning: str
    check: str | None = None


SOURCE = (
    Opt("subscribe", "", "exactly one of `subscribe`, `subscribePattern`, `assign`: a "
        "comma-separated topic list"),
    Opt("subscribePattern", "", "a regex over topic names, matched in full; topics and "
        "partitions that appear while the query runs are picked up"),
    Opt("assign", "", 'fixed partitions as JSON, `{"t":[0,1]}`'),
    Opt("startingOffsets", "streaming `latest`, batch `earliest`", "`earliest`, `latest` or "
        'JSON `{"t":{"0":23,"1":-2}}` (-2 earliest, -1 latest); where a new query starts',
        "stream:starting.kind"),
    Opt("startingTimestamp", "", "start every partition at its first offset at or after this "
        "time (ms); wins over `startingOffsetsByTimestamp` and `startingOffsets` (a warning "
        "names the ignored ones)"),
    Opt("startingOffsetsByTimestamp", "", 'per partition, `{"t":{"0":1700000000000}}`; wins '
        "over `startingOffsets`"),
    Opt("startingOffsetsByTimestampStrategy", "`error`", "`latest`: a partition with no record "
        "at or after the time starts at its latest offset; only with a starting timestamp"),
    Opt("endingOffsets", "`latest` (the last stable offset)", "batch reads only: `latest` or "
        "JSON offsets (-1 latest)", "batch:ending.kind"),
    Opt("endingTimestamp", "", "batch reads only; same precedence as the starting options"),
    Opt("endingOffsetsByTimestamp", "", "batch reads only, per partition"),
    Opt("maxOffsetsPerTrigger", "`1000000` on streaming reads (Spark: none)", "cap per "
        "micro-batch, spread over partitions like Spark; exact on pyspark 4.2+, approximate "
        "on 4.0/4.1 (see below). The default keeps a first batch over a backlog within the "
        "sink's transaction timeout ([sizing](operations.md#sizing-the-transaction-timeout))",
        "stream:max_offsets_per_trigger"),
    Opt("minOffsetsPerTrigger", "none", "as in Spark, where the Spark version supports it",
        "stream:min_offsets_per_trigger"),
    Opt("maxTriggerDelay", "`15m` (900000 ms)", "as in Spark, with `minOffsetsPerTrigger`; "
        "a duration like `500ms`, `30s`, `15m`", "stream:max_trigger_delay_ms"),
    Opt("minPartitions", "none", "split offset ranges into at least this many Spark tasks "
        "(when there are enough offsets)", "stream:min_partitions"),
    Opt("maxRecordsPerPartition", "none", "split offset ranges into tasks of at most this many "
        "offsets", "stream:max_records_per_partition"),
    Opt("maxPartitions", "none (one task per offset range, as Spark's connector)",
        "eoskafka's own: pack each batch's offset ranges into at most this many Spark tasks; "
        "set it to the task slots, `spark.sparkContext.defaultParallelism`, for one wave of "
        "tasks a batch (see [Notes on reading](#notes-on-reading))",
        "stream:max_partitions"),
    Opt("failOnDataLoss", "`true`", "offsets deleted by retention, and topics deleted while the "
        "query runs (between batches or in the middle of a task), fail it "
        "(`EOSKAFKA_DATA_LOSS`); `false` skips them with a warning",
        "stream:fail_on_data_loss"),
    Opt("includeHeaders", "`false`", "add a `headers` column "
        "`array<struct<key string, value binary>>`", "stream:include_headers"),
    Opt("fetchMaxBytes", "8388608 (8 MiB)", "bytes per partition fetch, at most 32 MiB",
        "stream:fetch_max_bytes"),
    Opt("kafkaConsumer.pollTimeoutMs", "120000 (2 min)", "how long a task waits for its planned "
        "offsets to be readable", "stream:poll_timeout_ms"),
    Opt("groupIdPrefix", "", "accepted for Spark jobs that set it; no effect"),
    Opt("fetchOffset.numRetries", "", "accepted for Spark jobs that set it; no effect"),
    Opt("fetchOffset.retryIntervalMs", "", "accepted for Spark jobs that set it; no effect"),
)

SINK = (
    Opt("topic", "none (a `topic` column then names it per row)", "output topic; wins over "
        "a `topic` column", "sink:topic"),
    Opt("checkpointLocation", "", "Spark's own, required for streaming; the decision log "
        "lives in `<checkpointLocation>/eoskafka/`, through pyarrow's filesystems (tested: "
        "local paths and `s3://`; `gs://`, `abfs://`, `hdfs://` go the same way, untested)"),
    Opt("decisionLogLocation", "none", "keep the decision log here instead; gives a batch write "
        "a durable decision; needed where pyarrow cannot write the checkpoint's scheme "
        "(`dbfs:/`; `s3a://` is read as `s3://`). Decisions are keyed by Spark's query id "
        "(from `<checkpointLocation>/metadata`), so a log kept across a checkpoint reset "
        "serves the new query; a log of another query's checkpoint is refused "
        "(`EOSKAFKA_DECISION_LOG_CONFLICT`)"),
    Opt("transactionalIdPrefix", "`eoskafka-<hash of the decision log's location>` "
        "(`decisionLogLocation`, else `checkpointLocation`); a batch write with neither: "
        "`eoskafka-batch-<random>`", "the transactional-id prefix, stable across restarts; "
        "claimed on the broker with the query id, so a second query using it is refused "
        "(`EOSKAFKA_TRANSACTIONAL_ID_CLASH`)"),
    Opt("delivery.guarantee", "`exactly_once`", "or `at_least_once`: idempotent writes, "
        "visible at once, no transactions (Spark's sink)", "sink:delivery"),
    Opt("producer.batchRecords", "10000", "records per produce batch", "sink:linger_records"),
    Opt("includeHeaders", "`false`", "accepted as Spark's sink accepts it; a `headers` column "
        "is written whenever the input has one"),
)

#: ``kafka.*`` keys read the same way by both sides (client_keys.CONNECTION_KEYS).
CONNECTION = (
    Opt("bootstrap.servers", "required", "`host:port[,host:port]`"),
    Opt("security.protocol", "`PLAINTEXT`", "`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`",
        "stream:client.security_protocol"),
    Opt("sasl.mechanism", "none (`PLAIN` with a PlainLoginModule line, `OAUTHBEARER` with an "
        "OAuthBearerLoginModule line, `GSSAPI` with a Krb5LoginModule line)", "`PLAIN`, "
        "`SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER`, `GSSAPI` (Kerberos with a keytab: "
        "[security](security.md#kerberos-gssapi))"),
    Opt("sasl.jaas.config", "", "a PlainLoginModule or ScramLoginModule line with username "
        "and password (`tokenauth=\"true\"` for a delegation token), an "
        "OAuthBearerLoginModule line with clientId, clientSecret, scope and `extension_*`, or "
        "a Krb5LoginModule line with `useKeyTab=true`, keyTab and principal, as in Spark's "
        "Kafka source (hidden everywhere)"),
    Opt("sasl.kerberos.service.name", "", "GSSAPI, required: the first part of the brokers' "
        "Kerberos principal (`kafka` for `kafka/HOST@REALM`), as Kafka's Java client"),
    Opt("sasl.kerberos.krb5.conf", "`KRB5_CONFIG`, else `/etc/krb5.conf`", "GSSAPI, "
        "eoskafka's own: the path of krb5.conf on the driver and every executor (Java reads "
        "the JVM's `java.security.krb5.conf` instead)"),
    Opt("sasl.oauthbearer.token.endpoint.url", "", "OAUTHBEARER: the identity provider's token "
        "endpoint (OIDC client credentials), as Kafka's Java client"),
    Opt("sasl.login.callback.handler.class", "", "OAUTHBEARER: Kafka's "
        "`OAuthBearerLoginCallbackHandler` (either package name); other Java classes are "
        "refused"),
    Opt("sasl.oauthbearer.token.provider", "", "OAUTHBEARER, eoskafka's own: `module:callable` "
        "returning `(token, expires_at)`, for AWS MSK IAM, Azure, GCP or any other source "
        "([security](security.md#a-python-token-provider))"),
    Opt("sasl.oauthbearer.client.credentials.client.id", "", "the client id outside the JAAS "
        "line (KIP-1139)"),
    Opt("sasl.oauthbearer.client.credentials.client.secret", "", "its secret (hidden)"),
    Opt("sasl.oauthbearer.scope", "", "the scope asked for"),
    Opt("sasl.login.refresh.window.factor", "0.8", "a token is refreshed after this share of "
        "its lifetime ..."),
    Opt("sasl.login.refresh.buffer.seconds", "300", "... or this long before it expires, "
        "whichever is first ..."),
    Opt("sasl.login.refresh.min.period.seconds", "60", "... but not sooner than this after it "
        "was fetched (unless the token lives shorter)"),
    Opt("sasl.login.connect.timeout.ms", "10000", "accepted (the token request's deadline is "
        "`kafka.sasl.login.read.timeout.ms`)"),
    Opt("sasl.login.read.timeout.ms", "10000", "how long a token request may take"),
    Opt("sasl.username", "", "with `kafka.sasl.password`, instead of a JAAS line"),
    Opt("sasl.password", "", "hidden everywhere"),
    Opt("ssl.truststore.location", "", "the CA certificate(s) of the brokers, **PEM**"),
    Opt("ssl.ca.location", "", "the same, under librdkafka's name"),
    Opt("ssl.truststore.type", "`PEM`", "`JKS`/`PKCS12` are refused with the command that "
        "converts the store"),
    Opt("ssl.truststore.password", "", "accepted; a PEM trust store has no password"),
    Opt("ssl.keystore.location", "", "a client certificate, **PEM** (with its key, or "
        "`kafka.ssl.key.location`)"),
    Opt("ssl.certificate.location", "", "the same, under librdkafka's name"),
    Opt("ssl.keystore.type", "`PEM`", "as `kafka.ssl.truststore.type`"),
    Opt("ssl.key.location", "", "the client key, **PEM**"),
    Opt("ssl.key.password", "", "the client key's password (hidden)"),
    Opt("ssl.keystore.password", "", "used as the key's password when "
        "`kafka.ssl.key.password` is not set (hidden)"),
    Opt("ssl.endpoint.identification.algorithm", "`https`", "`https`: the broker's host "
        "name must be in its certificate; empty: not checked"),
    Opt("request.timeout.ms", "30000", "how long one request waits for its answer",
        "stream:client.request_timeout_ms"),
    Opt("socket.connection.setup.timeout.ms", "10000", "how long a connection may take; an "
        "unreachable broker fails with `EOSKAFKA_BROKER_UNREACHABLE` after it",
        "stream:client.connect_timeout_ms"),
    Opt("client.id", "`eoskafka`", "the client id in every request",
        "stream:client.client_id"),
    Opt("default.api.timeout.ms", "60000 (1 min)", "the deadline of each driver-side or "
        "metadata operation, every retry included: planning, leader and coordinator lookups, "
        "fencing, aborts, group offsets (a restarting, paused or moved broker is retried until "
        "it passes)", "stream:client.api_timeout_ms"),
    Opt("delivery.timeout.ms", "120000 (2 min)", "how long a task re-sends an unacknowledged "
        "Produce batch (a moved or restarting leader, NOT_ENOUGH_REPLICAS); at least "
        "`kafka.request.timeout.ms`", "stream:client.delivery_timeout_ms"),
    Opt("max.block.ms", "60000 (1 min)", "the deadline of a task's transactional calls "
        "(FindCoordinator, InitProducerId, AddPartitionsToTxn)", "stream:client.max_block_ms"),
)

#: ``kafka.*`` keys that mean something on one side only (the others are refused there).
SOURCE_KAFKA = (
    Opt("isolation.level", "`read_committed`", "or `read_uncommitted` (Spark's default)"),
    Opt("group.id", "none", "streaming reads: each committed batch's end offsets are "
        "committed to this group, for Kafka's lag tools (advisory; see below); ignored on "
        "batch reads", "stream:progress_group"),
)
SINK_KAFKA = (
    Opt("transaction.timeout.ms", "900000 (15 min)", "at most 3600000 and at most the "
        "broker's `transaction.max.timeout.ms` (the broker checks it at the first InitProducerId: "
        "the driver's fencing at query start, or a task's); see "
        "[operations](operations.md#sizing-the-transaction-timeout)",
        "sink:transaction_timeout_ms"),
    Opt("acks", "`all`", "only `all` (or `-1`) is accepted"),
    Opt("enable.idempotence", "`true`", "`false` is refused"),
    Opt("compression.type", "`none`", "`gzip`, `snappy`, `lz4`, `zstd`: every produce batch "
        "(lz4 at its default level uses lz4's fast compressor, as Java does)"),
    Opt("compression.gzip.level", "-1 (zlib's 6)", "1-9, as the Java producer (KIP-390); a "
        "level for a codec the write does not use is refused"),
    Opt("compression.lz4.level", "9 (fast compressor)", "1-17: 3-17 other than 9 use lz4 HC"),
    Opt("compression.zstd.level", "3", "-131072 to 22"),
    Opt("batch.size", "900000", "cap on a produce batch's bytes (under the brokers' 1 MiB "
        "`message.max.bytes`); `0`: one record per batch", "sink:batch_bytes"),
    Opt("linger.ms", "0", "accepted and validated; adds no wait (a task batches from the rows "
        "it holds)"),
    Opt("max.request.size", "1048576", "cap on a Produce request's bytes",
        "const:eos_kafka_source.sink.task.writer:_MAX_REQUEST_SIZE"),
)


def _table(rows: tuple[Opt, ...], prefix: str = "") -> list[str]:
    out = ["| option | default | meaning |", "|---|---|---|"]
    out += [f"| `{prefix}{o.name}` | {o.default or '-'} | {o.meaning} |" for o in rows]
    return out


def _reasons(reasons: dict[str, str]) -> list[str]:
    out = ["| option | why |", "|---|---|"]
    out += [f"| `{PREFIX}{k}` | {reasons[k]} |" for k in sorted(reasons)]
    return out


def no_effect() -> list[str]:
    """Java client settings accepted (so Spark jobs keep working) that change nothing here."""
    used = {o.name for o in CONNECTION + SOURCE_KAFKA + SINK_KAFKA}
    return sorted((PASSTHROUGH_KEYS | OAUTH_PASSTHROUGH | KERBEROS_PASSTHROUGH) - used)


#: Said beside the sink options: what a batch costs is set by the tasks that write it.
SCALE_NOTE = (
    "**One transaction per writing task.** Every task that writes opens one Kafka "
    "transaction, and the driver commits them all at the end of the batch. After a "
    "shuffle that is `spark.sql.shuffle.partitions` tasks, 200 by default: 200 "
    "transactions, and a COMMIT marker on every partition each one touched, every "
    "micro-batch however few rows it holds. Coalesce before the sink (or lower the "
    "shuffle partitions) to what the output needs; costs by tasks and partitions are in "
    "[scale of one batch](scale.md).",
)


def render() -> str:
    """The generated part of docs/options.md (between its BEGIN and END markers)."""
    lines = [BEGIN, "<!-- generated by `python -m eos_kafka_source.options.reference "
             "--write`; edit eos_kafka_source/options/reference.py, not this section -->", "",
             "### Source options", "", *_table(SOURCE), "",
             "### Sink options", "", *_table(SINK), "", *SCALE_NOTE, "",
             "### `kafka.*` settings, source and sink", "", *_table(CONNECTION, PREFIX), "",
             "### `kafka.*` settings of the source only", "", *_table(SOURCE_KAFKA, PREFIX), "",
             "### `kafka.*` settings of the sink only", "", *_table(SINK_KAFKA, PREFIX), "",
             "### Accepted, no effect", "",
             "Java client settings a Spark job may carry; accepted on both sides and ignored "
             "(tuning of a client eoskafka does not run): "
             + ", ".join(f"`{PREFIX}{k}`" for k in no_effect()) + ".", "",
             "### Refused", "", "On both sides:", "", *_reasons(REJECTED), "",
             "On the source:", "", *_reasons(_SOURCE_REFUSED), "",
             "On the sink:", "", *_reasons(_SINK_REFUSED), "", END]
    return "\n".join(lines) + "\n"


def accepted_names() -> dict[str, set[str]]:
    """What the parsers accept, per table (for the drift test)."""
    return {"source": set(SOURCE_OPTIONS) | set(SOURCE_IGNORED), "sink": set(SINK_OPTIONS),
            "connection": set(CONNECTION_KEYS)}


def splice(page: str) -> str:
    """``page`` with its generated section replaced by :func:`render`."""
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END + "\n")
    return head + render() + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite the section in {PAGE}")
    args = parser.parse_args(argv)
    if args.write:
        PAGE.write_text(splice(PAGE.read_text()))
    else:
        sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
