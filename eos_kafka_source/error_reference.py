"""The error reference (docs/errors.md), generated from the conditions the code raises.

Every error eoskafka raises carries an ``EOSKAFKA_*`` condition (errors.py) at the start of
its message. Each condition has one entry here: what it means, its likely causes, whether
data is at risk, and what to do. ``tests/unit/test_error_reference.py`` fails when a
condition any module defines has no entry, an entry names no condition, or the committed
page differs from :func:`render`. The page also lists the CLI's ``--json`` documents, taken
from each command's docstring, so they are documented where they are defined.

    python -m eos_kafka_source.error_reference              # print the page
    python -m eos_kafka_source.error_reference --write      # rewrite docs/errors.md
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from dataclasses import dataclass
from pathlib import Path

from . import errors

PAGE = Path(__file__).resolve().parents[1] / "docs" / "errors.md"
#: The commands whose docstrings describe a ``--json`` document.
JSON_COMMANDS = ("audit", "broker", "fence", "lag", "migrate", "registry", "txns")


@dataclass(frozen=True)
class Entry:
    condition: str
    meaning: str
    causes: str
    #: "no" or what may be missing or doubled, in a few words.
    data: str
    action: str
    #: Markdown after the four fields, for a condition whose message varies (a table).
    details: str = ""


_NO = "no"

ENTRIES: tuple[Entry, ...] = (
    Entry("EOSKAFKA_INVALID_OPTION",
          "an option is unknown, malformed, or conflicts with another",
          "a misspelt name (the message offers a \"did you mean\"), a `kafka.*` key eoskafka "
          "refuses, a value out of range, two options that exclude each other",
          _NO, "fix the option the message names; [options](options.md) lists every one"),
    Entry("EOSKAFKA_INVALID_INPUT_SCHEMA",
          "the columns written to the sink do not fit it",
          "no `value` column, a column of a type Kafka cannot carry, a `topic` column and a "
          "`topic` option both missing",
          _NO, "select the columns the sink takes ([options](options.md#sink-options))"),
    Entry("EOSKAFKA_INVALID_TIMESTAMP",
          "the broker refused a record's timestamp",
          "a `timestamp` column more than an hour in the future (Kafka 4.x), or outside the "
          "topic's `message.timestamp.*` bounds",
          "no: the batch fails before anything commits",
          "fix the column the message names, or drop it to let Kafka stamp records"),
    Entry("EOSKAFKA_RECORD_TOO_LARGE",
          "a record is larger than the broker or topic accepts",
          "a value over `message.max.bytes` / the topic's `max.message.bytes`",
          "no: the batch fails before anything commits",
          "split the payload, or raise the topic's limit"),
    Entry("EOSKAFKA_BROKER_UNREACHABLE",
          "no bootstrap broker answered within the connection deadline",
          "a wrong `kafka.bootstrap.servers`, a firewall, a listener advertising an address "
          "the client cannot reach, every broker down",
          _NO, "check the address and that the broker's advertised listener is reachable "
          "from the driver and the executors; then restart"),
    Entry("EOSKAFKA_AUTHENTICATION_FAILED",
          "the broker refused the sign-in, or the TLS handshake failed for good",
          "wrong SASL credentials or mechanism, an expired token, a trust store without the "
          "broker's CA, a hostname that does not match the certificate",
          _NO, "fix the `kafka.sasl.*` / `kafka.ssl.*` options ([security](security.md))"),
    Entry("EOSKAFKA_NOT_AUTHORIZED",
          "the broker's authorizer refused an operation",
          "a missing ACL; the message's first line names the principal, the resource, the "
          "operation and the `kafka-acls.sh` line that grants it",
          _NO, "grant the ACL the message prints ([ACLs](acls.md)); restart"),
    Entry("EOSKAFKA_DELEGATION_TOKEN",
          "a Kafka delegation token could not be created, renewed or used",
          "the principal may not create tokens, the token expired or was past its max "
          "lifetime, a broker without delegation tokens enabled",
          _NO, "see [security](security.md#delegation-tokens)"),
    Entry("EOSKAFKA_CONNECTION_DROPPED",
          "a broker closed the connection instead of answering",
          "a broker restart, TLS against a plaintext listener, a proxy timeout",
          "no: requests are retried where safe, failed tasks by Spark",
          "if it persists, check the listener's security protocol and the broker's log"),
    Entry("EOSKAFKA_TOPIC_NOT_FOUND",
          "a topic the query names does not exist",
          "a misspelt topic; eoskafka never creates topics",
          _NO, "create the topic, or fix its name"),
    Entry("EOSKAFKA_DATA_LOSS",
          "offsets the query still needs are gone from the input",
          "retention or `kafka-delete-records` removed them, the topic was deleted or "
          "recreated, a leader was truncated",
          "yes: the input records between the offsets named are no longer readable",
          "with `failOnDataLoss=false` the query skips them with a warning; otherwise reset "
          "the starting offsets ([lifecycle](lifecycle.md))"),
    Entry("EOSKAFKA_AVAILABLE_NOW_BACKLOG_TOO_LARGE",
          "a `Trigger.AvailableNow` run on pyspark 4.0/4.1 would end with input unread",
          "Spark 4.0/4.1 end such a run after one batch, and the backlog exceeds "
          "`maxOffsetsPerTrigger` (or the default [read bound](glossary.md#read-bound))",
          "no: the query fails before reading anything",
          "run on pyspark 4.2+, raise `maxOffsetsPerTrigger` to the number named, or use a "
          "processing-time trigger ([options](options.md#notes-on-reading))"),
    Entry("EOSKAFKA_CORRUPT_RECORD",
          "a record batch read from the broker failed its CRC or could not be parsed",
          "a damaged log segment, a proxy that altered bytes, a malformed batch",
          "the batch named (topic, partition, offset) cannot be read",
          "check the partition with `kafka-dump-log.sh`; the query fails rather than skip it"),
    Entry("EOSKAFKA_MALFORMED_PAYLOAD",
          "a key or value read with `valueFormat`/`keyFormat` did not decode; the message "
          "names the record, its schema id and why",
          "a record not in Confluent's wire format, a schema id the registry does not have, "
          "bytes that do not match their writer schema, a writer schema that does not "
          "resolve to the reader schema",
          "no: the query stops at the record; nothing of the batch is committed",
          "fix the producer, read with `mode` `PERMISSIVE`, or choose a reader schema the "
          "writer schemas resolve to ([formats](formats.md#bad-records-failfast-and-permissive))"),
    Entry("EOSKAFKA_PAYLOAD_DOES_NOT_FIT_SCHEMA",
          "a row written with `valueFormat`/`keyFormat` does not fit its schema; the "
          "message names the column, the field and why",
          "a null in a field the schema does not allow null, a column the schema has no "
          "field for, a value out of the schema type's range",
          "no: the batch fails before anything commits",
          "fix the column, or write with a schema that fits it"),
    Entry("EOSKAFKA_TIMEOUT",
          "an operation did not finish within its deadline",
          "a batch longer than `kafka.transaction.timeout.ms` (Kafka aborted it), a "
          "coordinator that kept moving, a broker that stopped answering",
          "no: nothing of the batch was committed; it replays",
          "a batch too long: raise `kafka.transaction.timeout.ms` or lower "
          "`maxOffsetsPerTrigger` ([sizing](operations.md#sizing-the-transaction-timeout))"),
    Entry("EOSKAFKA_TRANSACTION_LOST",
          "a handed-off transaction could not be committed, or decided records could not "
          "be copied back from the log",
          "by the message's first words, in the table below",
          "only when the message says LOST: the named partitions and counts",
          "read the message's first words against the table below; a final loss is "
          "recorded once and the query goes on",
          "\n".join((
              "| the message says | what happened | what you do |",
              "|---|---|---|",
              "| \"*N of its transactions were fenced after their tasks handed them over*\" "
              "| before the decision, a [zombie](glossary.md#zombie), an operator's fence or "
              "Kafka's timeout aborted one | nothing committed: restart, the batch replays; "
              "find who fenced (`eoskafka fence` on a running query, a second query on the "
              "prefix, `spark.speculation`) |",
              "| \"*no transaction could be committed (fenced or expired)*\" | a decided "
              "batch none of whose transactions committed; the decision is withdrawn | "
              "nothing is lost: the batch replays on restart |",
              "| \"*... the log no longer holds their records ... LOST*\" | Kafka aborted "
              "decided transactions (the driver down past the transaction timeout, a fence, "
              "`kafka-transactions.sh abort`) and retention removed their records before the "
              "copy (\"*committed or lost*\": the marker went too) | the named partitions "
              "and counts are missing; rerun that input range (`<checkpoint>/offsets/` of "
              "the batch and the one before) with a batch read and write |",
              "| \"*the batch write could not commit N transaction(s) after M others "
              "were*\" | a batch `df.write` without `decisionLogLocation` half committed | "
              "the named records are missing; give batch writes a `decisionLogLocation` |",
              "| \"*refusing hand-offs written with transaction protocol generation*\" | "
              "executors and driver run different eoskafka versions | install one version "
              "everywhere, restart |",
              "| \"*refusing hand-offs that do not belong to this query's id prefix*\", "
              "\"*whose epoch the driver has already fenced*\" | a hand-off from another "
              "query or a zombie | nothing of this query is lost; look for two queries "
              "sharing a checkpoint or prefix |"))),
    Entry("EOSKAFKA_TRANSACTION_OUTCOME_UNKNOWN",
          "whether some EndTxn committed is not known yet",
          "the transaction coordinator moved or could not be reached until the deadline, "
          "or the log could not be read",
          "no: the decision is kept",
          "restart once the brokers hosting `__transaction_state` are healthy: the restart "
          "[rolls the batch forward](glossary.md#roll-forward)"),
    Entry("EOSKAFKA_HANGING_TRANSACTION",
          "a decided transaction hangs on a partition, as `kafka-transactions.sh "
          "find-hanging` judges one",
          "no coordinator lists the partition for the transaction and nothing was written "
          "to it within the maximum transaction timeout, so no [marker](glossary.md#marker) "
          "will come (seen after coordinator and leader kills); and the query's principal "
          "lacks CLUSTER_ACTION to write the marker itself. A marker that is only late (its "
          "coordinator still lists the partition) is waited for, never this error",
          "no: the decision is kept",
          "run the `kafka-transactions.sh ... abort` command the message names, then "
          "restart the query: it copies the partition's records from the log "
          "([operations](operations.md#hanging-transactions))"),
    Entry("EOSKAFKA_DECISION_LOG_CONFLICT",
          "the decision log belongs to another query, or another driver wrote the same "
          "decision",
          "two queries (or two deployments, prod and DR) sharing a checkpoint or "
          "`decisionLogLocation`",
          "no: refused before any task starts",
          "give each query its own checkpoint and decision log location"),
    Entry("EOSKAFKA_DECISION_LOG_FORMAT",
          "a decision-log file was written by a newer eoskafka",
          "a rollback to an older version after a newer one ran on the same log",
          "no: refused before anything is committed or aborted",
          "run the newer version again ([compatibility](compatibility.md))"),
    Entry("EOSKAFKA_DECISION_STORE_FAILED",
          "the store holding the decision log failed a read or a write",
          "a full disk, a permission, an object store's or HDFS's error",
          "no: the batch fails; nothing decided is lost",
          "fix the store (space, permissions, credentials), then restart: the query replays "
          "or finishes the batch from the log"),
    Entry("EOSKAFKA_REPLAY_MISMATCH",
          "a batch id came back with another input range than its recorded decision",
          "a rewound checkpoint (`offsets/N` and `commits/N` deleted), a changed source",
          "no: refused before anything is aborted",
          "restore the checkpoint files the message names, or start a new checkpoint"),
    Entry("EOSKAFKA_CHECKPOINT_UNREADABLE",
          "Spark's checkpoint files (`metadata`, `offsets/N`) cannot be read",
          "a scheme pyarrow cannot read (`dbfs:`, `viewfs:`), the store's error, a missing "
          "`offsets/N`",
          "no: refused before anything is committed or aborted",
          "give `checkpointLocation` as a URI pyarrow reads (file://, s3://, gs://, abfs://, "
          "hdfs://); a store error: restart once it answers"),
    Entry("EOSKAFKA_DECISION_LOG_ELSEWHERE",
          "the decision log would not be where Spark's checkpoint is",
          "a `checkpointLocation` without a scheme that Spark resolved on `fs.defaultFS` "
          "(`hdfs:` on YARN, `dbfs:` on Databricks); a [claim](glossary.md#claim) whose "
          "decision log is on another host's local disk",
          "no: refused before any task writes",
          "give `checkpointLocation` with its scheme, as Spark resolves it; run the driver "
          "where the claim's decision log is"),
    Entry("EOSKAFKA_PREVIOUS_WRITE_COMPLETED",
          "a batch write found an earlier write's unfinished commit and finished it",
          "the earlier write's driver died, or its commit failed, after its decision",
          "no; but rerunning that earlier write would write its rows twice",
          "do not rerun the earlier write (its rows are committed); run this one again"),
    Entry("EOSKAFKA_WRITE_COMMITTED",
          "a batch write failed after its commit decision and eoskafka finished it",
          "an unknown EndTxn outcome or a store failure after the decision",
          "no: every row is committed although Spark reports a failure",
          "do not rerun the write"),
    Entry("EOSKAFKA_TRANSACTIONAL_ID_CLASH",
          "two queries would share one transactional-id prefix",
          "the same `transactionalIdPrefix` (or the same derived one) used by another query",
          "no: refused before any task starts",
          "give each query its own prefix, or stop the other query"),
    Entry("EOSKAFKA_KAFKA_ERROR",
          "a broker answered with a Kafka error code eoskafka does not retry",
          "named in the message (`Kafka error <code> <NAME> on <request>`)",
          "no: the step fails before anything is decided, or keeps its decision",
          "look the code up in Kafka's protocol errors; the message names the request"),
    Entry("EOSKAFKA_SCHEMA_REGISTRY",
          "the schema registry could not be reached, refused the sign-in, or answered with "
          "an error",
          "a wrong `schema.registry.url`, a registry down or unreachable from the executors, "
          "wrong or missing credentials (HTTP 401/403), a CA that does not sign the "
          "registry's certificate; the message quotes the registry's own error",
          _NO, "fix the option the message names; check the registry answers "
          "`curl <url>/subjects` from the driver and the executors "
          "([formats](formats.md))"),
    Entry("EOSKAFKA_SCHEMA_NOT_FOUND",
          "the registry holds no schema with the id, subject or version named",
          "records written with another registry, a misspelt subject, a deleted version, a "
          "subject never registered",
          "no: the read or write fails before anything commits",
          "list what the registry holds (`curl <url>/subjects`); point "
          "`schema.registry.url` at the registry the producer used"),
    Entry("EOSKAFKA_SCHEMA_INCOMPATIBLE",
          "the registry refused a schema under the subject's compatibility level",
          "a change the level forbids (a field removed without a default under BACKWARD, a "
          "type changed); the message carries the registry's reasons verbatim",
          "no: nothing is written with the refused schema",
          "make the change compatible (add defaults, add rather than rename), or change the "
          "subject's level (`PUT <url>/config/<subject>`) if the consumers allow it"),
    Entry("EOSKAFKA_KAFKA_NEEDS_JAVA",
          "running Apache Kafka locally (`eoskafka broker --kafka`, tests) needs Java and "
          "Maven",
          "no `java` or `mvn` on the PATH",
          _NO, "install Java 17+ and Maven, or use the embedded broker"),
    Entry("EOSKAFKA_REGISTRY_UNAVAILABLE",
          "the development schema registry (`eoskafka registry`, the format tests) cannot be "
          "fetched or started",
          "no JDK 21 or newer (Apicurio Registry needs one), no `mvn` to fetch it once, "
          "Maven Central unreachable, or the registry exiting while it starts (its log is "
          "named)",
          _NO, "install a JDK 21+ (or point `JAVA_HOME` at one) and Maven, as the message "
          "says; or use a registry you run elsewhere"),
    Entry("EOSKAFKA_USAGE",
          "an `eoskafka` command line is incomplete or contradicts itself (exit code 2)",
          "a missing `--bootstrap-server`, two options that exclude each other",
          _NO, "see `eoskafka <command> --help` and [the CLI](cli.md)"),
    Entry("EOSKAFKA_ERROR",
          "the base condition; raised on its own only for failures with no better name",
          "the message says", "the message says", "the message names the fix"),
)

BY_CONDITION = {e.condition: e for e in ENTRIES}


def defined_conditions() -> set[str]:
    """Every condition a class of this package defines (all modules imported first)."""
    package = sys.modules[__package__ or "eos_kafka_source"]
    for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
        if not info.name.rsplit(".", 1)[-1].startswith("__"):
            importlib.import_module(info.name)
    found: set[str] = set()
    todo: list[type[errors.EosKafkaError]] = [errors.EosKafkaError]
    while todo:
        cls = todo.pop()
        found.add(cls.condition)
        todo += cls.__subclasses__()
    return found


def _anchor(condition: str) -> str:
    return condition.lower()


def render() -> str:
    out = [
        "# Errors and the CLI's JSON",
        "",
        "<!-- generated by `python -m eos_kafka_source.error_reference --write`: edit "
        "eos_kafka_source/error_reference.py, not this page -->",
        "",
        "Every eoskafka error starts with its condition in brackets, as "
        "`[EOSKAFKA_TRANSACTION_LOST] batch 7: ...`; the rest of the message names what "
        "happened and the fix. Look the condition up here.",
        "",
        "| condition | means |",
        "|---|---|",
    ]
    for e in ENTRIES:
        out.append(f"| [`{e.condition}`](#{_anchor(e.condition)}) | {e.meaning} |")
    for e in ENTRIES:
        out += ["", f"## {e.condition}", "",
                f"**Causes**: {e.causes}.", "",
                f"**Data at risk**: {e.data}.", "",
                f"**Fix**: {e.action}."]
        if e.details:
            out += ["", e.details]
    out += ["", "## The CLI's JSON documents", "",
            "Every `eoskafka` command takes `--json` and then prints one JSON document on "
            "stdout. Its `version` changes only when a field changes meaning or goes away; "
            "new fields may be added. Exit codes: 0 fine, 1 a problem found, 2 a usage or "
            "connection error."]
    for command in JSON_COMMANDS:
        out += ["", f"### `eoskafka {command} --json`", "", "```text", *json_fields(command),
                "```"]
    return "\n".join(out) + "\n"


def json_fields(command: str) -> list[str]:
    """The ``--json`` part of a command's docstring, as written there."""
    doc = importlib.import_module(f"{__package__}.cli.{command}").__doc__ or ""
    lines = doc.splitlines()
    start = next(i for i, ln in enumerate(lines) if "--json" in ln and (
        "document" in ln or "one line" in ln))
    kept: list[str] = []
    blank = False
    for line in lines[start:]:
        if line.startswith("Exit ") or (blank and line and not line.startswith(" ")):
            break
        blank = not line.strip()
        kept.append(line.replace("``", "`"))
    while kept and not kept[-1].strip():
        kept.pop()
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help="rewrite docs/errors.md")
    args = parser.parse_args(argv)
    page = render()
    if args.write:
        PAGE.write_text(page)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
