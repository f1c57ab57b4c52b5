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

from ..client.keys import PREFIX
from ..client.table import BOTH, HONOURED, TABLE, honoured
from ..client.table import SINK as ON_SINK
from ..client.table import SOURCE as ON_SOURCE
from ..formats.registry_config import REGISTRY_OPTIONS
from ._common import SINK_OPTIONS, SOURCE_IGNORED, SOURCE_OPTIONS

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
    Opt("subscribePattern", "", "a regex over topic names, matched in full; new topics "
        "and partitions are picked up"),
    Opt("assign", "", 'fixed partitions as JSON, `{"t":[0,1]}`'),
    Opt("startingOffsets", "streaming `latest`, batch `earliest`", "`earliest`, `latest` or "
        'JSON `{"t":{"0":23,"1":-2}}` (-2 earliest, -1 latest); where a new query starts',
        "stream:starting.kind"),
    Opt("startingTimestamp", "", "start every partition at its first offset at or after this "
        "time (ms); wins over the two below"),
    Opt("startingOffsetsByTimestamp", "", 'per partition, `{"t":{"0":1700000000000}}`; wins '
        "over `startingOffsets`"),
    Opt("startingOffsetsByTimestampStrategy", "`error`", "`latest`: a partition with no record "
        "at or after the time starts at its end"),
    Opt("endingOffsets", "`latest` (the last stable offset)", "batch reads only: `latest` or "
        "JSON offsets (-1 latest)", "batch:ending.kind"),
    Opt("endingTimestamp", "", "batch reads only; same precedence as the starting options"),
    Opt("endingOffsetsByTimestamp", "", "batch reads only, per partition"),
    Opt("maxOffsetsPerTrigger", "`1000000` on streaming reads (Spark: none)", "the "
        "[read bound](glossary.md#read-bound): offsets per micro-batch, spread over partitions "
        "like Spark; exact on pyspark 4.2+, approximate on 4.0/4.1 "
        "([notes](#notes-on-reading))",
        "stream:max_offsets_per_trigger"),
    Opt("minOffsetsPerTrigger", "none", "as in Spark, where the Spark version supports it",
        "stream:min_offsets_per_trigger"),
    Opt("maxTriggerDelay", "`15m` (900000 ms)", "as in Spark, with `minOffsetsPerTrigger`; "
        "a duration like `500ms`, `30s`, `15m`", "stream:max_trigger_delay_ms"),
    Opt("minPartitions", "none", "split offset ranges into at least this many Spark tasks "
        "(when there are enough offsets)", "stream:min_partitions"),
    Opt("maxRecordsPerPartition", "none", "split offset ranges into tasks of at most this many "
        "offsets", "stream:max_records_per_partition"),
    Opt("maxPartitions", "the task slots (none set; a task per offset range when they "
        "cannot be known)",
        "eoskafka's own: pack each batch's offset ranges into at most this many tasks. Not "
        "set: the [task slots](glossary.md#task-slot), for [one wave](glossary.md#one-wave), "
        "never fewer than `minPartitions`; the topic's partition count gives a task per Kafka "
        "partition, as Spark's connector ([notes](#notes-on-reading))",
        "stream:max_partitions"),
    Opt("failOnDataLoss", "`true`", "offsets deleted by retention, and topics deleted while the "
        "query runs, fail it (`EOSKAFKA_DATA_LOSS`); `false` skips them with a warning",
        "stream:fail_on_data_loss"),
    Opt("includeHeaders", "`false`", "add a `headers` column "
        "`array<struct<key string, value binary>>`", "stream:include_headers"),
    Opt("fetchMaxBytes", "8388608 (8 MiB)", "bytes per partition fetch, at most 32 MiB",
        "stream:fetch_max_bytes"),
    Opt("kafkaConsumer.pollTimeoutMs", "120000 (2 min)", "how long a task waits for its planned "
        "offsets to be readable", "stream:poll_timeout_ms"),
    Opt("valueFormat", "`raw`", "`avro`, `protobuf` or `json`: decode `value` from "
        "Confluent's wire format into a struct, with the reader schema from the registry "
        "([formats](formats.md)); needs `schema.registry.url`", "const:eos_kafka_source."
        "formats.options:RAW"),
    Opt("keyFormat", "`raw`", "the same for `key`", "const:eos_kafka_source.formats.options:RAW"),
    Opt("valueSubject", "`<topic>-value` (one topic read)", "the subject whose version is the "
        "reader schema; required for several topics or a pattern unless an id or text is given"),
    Opt("keySubject", "`<topic>-key` (one topic read)", "the same for `key`"),
    Opt("valueSchemaVersion", "`latest`, fixed when the query starts", "the reader schema's "
        "version in the subject (a number)"),
    Opt("keySchemaVersion", "`latest`", "the same for `key`"),
    Opt("valueSchemaId", "none", "the reader schema by registry id instead of subject version"),
    Opt("keySchemaId", "none", "the same for `key`"),
    Opt("valueSchema", "none", "the reader schema's text (Avro JSON, JSON Schema, or a "
        ".proto) instead of a registered one; writer schemas still come from the registry"),
    Opt("keySchema", "none", "the same for `key`"),
    Opt("valueMessageName", "the schema's first message", "`valueFormat=protobuf`: the "
        "reader message, full (`shop.Order`) or short name"),
    Opt("keyMessageName", "the schema's first message", "the same for `key`"),
    Opt("mode", "`FAILFAST`", "`PERMISSIVE`: a payload that does not decode gives a null "
        "`value` and its reason in a `valueError` string column (`keyError` for keys); "
        "`FAILFAST` fails the query naming topic, partition and offset. Spark's `from_avro` "
        "names", "const:eos_kafka_source.formats.schemas:FAILFAST"),
    Opt("includeSchemaId", "`false`", "add int columns `valueSchemaId` (and `keySchemaId`): "
        "each record's writer schema id"),
    Opt("includeDeadLetter", "`false`", "with `mode=PERMISSIVE`: add a `deadLetter` struct "
        "column, null where the record decoded, else the record as it was (raw `key`, `value`, "
        "`headers`, `topic`, `partition`, `offset`, `timestamp`) with `stage` and `error`; "
        "the sink's `deadLetterTopic` writes it ([formats](formats.md#dead-letters))"),
    Opt("groupIdPrefix", "", "accepted for Spark jobs that set it; no effect"),
    Opt("fetchOffset.numRetries", "", "accepted for Spark jobs that set it; no effect"),
    Opt("fetchOffset.retryIntervalMs", "", "accepted for Spark jobs that set it; no effect"),
)

SINK = (
    Opt("topic", "none (a `topic` column then names it per row)", "output topic; wins over "
        "a `topic` column", "sink:topic"),
    Opt("checkpointLocation", "", "Spark's own; the "
        "[decision log](glossary.md#decision-log) lives in `<checkpointLocation>/eoskafka/`. "
        "Give it with its scheme (`s3://`, `hdfs://`; [cluster](cluster.md#where-state-lives)). "
        "Given only as `spark.sql.streaming.checkpointLocation`, it needs "
        "`decisionLogLocation`"),
    Opt("decisionLogLocation", "none", "keep the decision log here instead; gives a batch write "
        "a durable decision; without a scheme, the driver's local disk. Another query's log "
        "is refused (`EOSKAFKA_DECISION_LOG_CONFLICT`)"),
    Opt("transactionalIdPrefix", "`eoskafka-<hash of the decision log's location>` "
        "(`decisionLogLocation`, else `checkpointLocation`); a batch write with neither: "
        "`eoskafka-batch-<random>`", "the [prefix](glossary.md#transactional-"
        "id-prefix), stable across restarts; "
        "a second query using it is refused (`EOSKAFKA_TRANSACTIONAL_ID_CLASH`)"),
    Opt("delivery.guarantee", "`exactly_once`", "or `at_least_once`: idempotent writes, "
        "visible at once, no transactions (Spark's sink)", "sink:delivery"),
    Opt("producer.batchRecords", "10000", "records per produce batch", "sink:linger_records"),
    Opt("deadLetterTopic", "none", "rows whose `deadLetter` column is set (a PERMISSIVE read "
        "with `includeDeadLetter`) go here as their original records, with Kafka Connect's "
        "`__connect.errors.*` context headers, in the same transaction as the good rows "
        "([formats](formats.md#dead-letters)); the topic must exist", "sink:dead_letter_topic"),
    Opt("includeHeaders", "`false`", "accepted as Spark's sink accepts it; a `headers` column "
        "is written whenever the input has one"),
    Opt("valueFormat", "`raw`", "`avro`, `protobuf` or `json`: encode a struct `value` in "
        "Confluent's wire format with a registered schema ([formats](formats.md)); needs "
        "`schema.registry.url`"),
    Opt("keyFormat", "`raw`", "the same for `key`"),
    Opt("valueSubject", "none (from the strategy)", "write under this subject, whatever the "
        "strategy"),
    Opt("keySubject", "none (from the strategy)", "the same for `key`"),
    Opt("value.subject.name.strategy", "`TopicNameStrategy`", "`RecordNameStrategy`, "
        "`TopicRecordNameStrategy`, or Confluent's class names; a `topic` column needs "
        "`RecordNameStrategy` or `valueSubject`"),
    Opt("key.subject.name.strategy", "`TopicNameStrategy`", "the same for `key`"),
    Opt("auto.register.schemas", "`true`", "register the schema derived from the column's "
        "type at query start (an incompatible one fails the query then, with the registry's "
        "reasons); `false`: it must be registered already"),
    Opt("use.latest.version", "`false`", "with `auto.register.schemas=false`: write with the "
        "subject's latest version (checked against the column at start)"),
    Opt("recordName", "`topLevelRecord`", "the derived schema's record (Avro), message "
        "(Protobuf) or title (JSON Schema) name, as spark-avro's `to_avro`",
        "const:eos_kafka_source.formats.options:RECORD_NAME"),
    Opt("recordNamespace", "none", "the derived schema's namespace (Avro) or package "
        "(Protobuf)"),
    Opt("queryName", "none", "Spark's own (`writeStream.queryName(...)`); with "
        "`spark.sql.streaming.checkpointLocation`, the checkpoint is `<that conf>/<queryName>`"),
)

#: ``schema.registry.*``: read the same way by both sides, with a non-raw format only.
REGISTRY = (
    Opt("schema.registry.url", "", "the registry's base URL (Confluent's REST API; Apicurio: "
        "`http://host:8080/apis/ccompat/v7`); several, comma-separated, are tried in order"),
    Opt("schema.registry.basic.auth.credentials.source", "`USER_INFO`", "`USER_INFO` or "
        "`URL` (credentials in the URL), as Confluent's clients"),
    Opt("schema.registry.basic.auth.user.info", "", "HTTP basic sign-in, `user:password`"),
    Opt("schema.registry.bearer.auth.credentials.source", "`STATIC_TOKEN`", "`STATIC_TOKEN` "
        "only: the token in `schema.registry.bearer.auth.token` (none is fetched)"),
    Opt("schema.registry.bearer.auth.token", "", "a bearer token"),
    Opt("schema.registry.bearer.auth.logical.cluster", "", "Confluent Cloud's logical "
        "cluster header, with a bearer token"),
    Opt("schema.registry.bearer.auth.identity.pool.id", "", "Confluent Cloud's identity "
        "pool header, with a bearer token"),
    Opt("schema.registry.ssl.ca.location", "the system's CAs", "PEM CA file for `https://`; "
        "the host name is verified"),
    Opt("schema.registry.ssl.certificate.location", "", "client certificate (PEM) for mutual "
        "TLS"),
    Opt("schema.registry.ssl.key.location", "", "its private key (PEM)"),
    Opt("schema.registry.ssl.key.password", "", "the key's password"),
    Opt("schema.registry.request.timeout.ms", "10000", "one request's deadline",
        "const:eos_kafka_source.formats.registry_config:DEFAULT_TIMEOUT_MS"),
    Opt("schema.registry.max.retries", "3", "retries of an unreachable or overloaded registry "
        "(connection errors, HTTP 408, 429, 5xx), after every URL was tried",
        "const:eos_kafka_source.formats.registry_config:DEFAULT_MAX_RETRIES"),
    Opt("schema.registry.retries.wait.ms", "1000", "first backoff, jittered and doubled",
        "const:eos_kafka_source.formats.registry_config:DEFAULT_RETRIES_WAIT_MS"),
    Opt("schema.registry.retries.max.wait.ms", "20000", "longest backoff",
        "const:eos_kafka_source.formats.registry_config:DEFAULT_RETRIES_MAX_WAIT_MS"),
)


def _kafka(side: str) -> tuple[Opt, ...]:
    """The honoured ``kafka.*`` keys of ``side``, from the table (client/table.py)."""
    return tuple(Opt(name, key.default, key.text, key.check)
                 for name, key in honoured(side).items())


#: ``kafka.*`` keys read the same way by both sides; those of one side only (the other
#: refuses them).
CONNECTION, SOURCE_KAFKA, SINK_KAFKA = _kafka(BOTH), _kafka(ON_SOURCE), _kafka(ON_SINK)


def _table(rows: tuple[Opt, ...], prefix: str = "") -> list[str]:
    out = ["| option | default | meaning |", "|---|---|---|"]
    out += [f"| `{prefix}{o.name}` | {o.default or '-'} | {o.meaning} |" for o in rows]
    return out


def refused() -> list[str]:
    """Every ``kafka.*`` key refused on both sides: refused or not applicable, and why; keys
    that share a reason share a row."""
    rows: dict[tuple[str, str], list[str]] = {}
    for name, key in sorted(TABLE.items()):
        if key.status != HONOURED:
            rows.setdefault((key.status, key.text), []).append(f"`{PREFIX}{name}`")
    out = ["| options | status | why, and what to use |", "|---|---|---|"]
    out += [f"| {', '.join(names)} | {status} | {text} |"
            for (status, text), names in sorted(rows.items(), key=lambda r: r[1][0])]
    return out


#: Said beside the sink options: what a batch costs is set by the tasks that write it.
SCALE_NOTE = (
    "Every task that writes is one Kafka transaction a batch: coalesce before the sink "
    "([sizing](cluster.md#size-it)).",
)


def render() -> str:
    """The generated part of docs/options.md (between its BEGIN and END markers)."""
    lines = [BEGIN, "<!-- generated by `python -m eos_kafka_source.options.reference "
             "--write`; edit eos_kafka_source/options/reference.py, not this section -->", "",
             "### Source options", "", *_table(SOURCE), "",
             "### Sink options", "", *_table(SINK), "", *SCALE_NOTE, "",
             "### Schema registry settings, source and sink", "",
             "With `valueFormat` or `keyFormat` other than `raw` ([formats](formats.md)); "
             "refused without. Confluent's client names.", "", *_table(REGISTRY), "",
             "### `kafka.*` settings, source and sink", "", *_table(CONNECTION, PREFIX), "",
             "### `kafka.*` settings of the source only", "", *_table(SOURCE_KAFKA, PREFIX), "",
             "### `kafka.*` settings of the sink only", "", *_table(SINK_KAFKA, PREFIX), "",
             "### Refused", "",
             "Every setting of Kafka's 4.4 producer, consumer and admin clients is above or "
             "here; none is accepted and ignored. A setting of the source only is refused on "
             "the sink, and the reverse. **Not applicable**: it tunes a part of the Java "
             "client eoskafka does not have. Both sides refuse:", "", *refused(), "", END]
    return "\n".join(lines) + "\n"


def accepted_names() -> dict[str, set[str]]:
    """What the parsers accept, per table (for the drift test)."""
    return {"source": set(SOURCE_OPTIONS) | set(SOURCE_IGNORED), "sink": set(SINK_OPTIONS),
            "connection": set(honoured(BOTH)), "registry": set(REGISTRY_OPTIONS)}


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
