"""Kafka's own command-line tools (kafka-tools), run from the cached jars.

An independent view of a cluster for tests, the demo and the chaos verdict: the
Java console consumer with ``isolation.level=read_committed`` (what Kafka itself
considers committed), ``kafka-transactions`` (open and hanging transactions) and
``kafka-consumer-groups`` (lag). Always the newest pinned tools: they speak to
3.9 brokers too.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from .jars import DEFAULT_VERSION, LEAN_JVM_OPTIONS, classpath, require_java

CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"

#: The tools log to stderr (their stdout is parsed), warnings and above only.
_LOG4J2 = """\
status = warn
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %d %p %m%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
"""

#: Transaction states Kafka's tool reports for a transaction that has not ended.
OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


@dataclass(frozen=True)
class ConsumedRecord:
    partition: int
    offset: int
    value: bytes


@dataclass(frozen=True)
class OpenOnPartition:
    """A producer's transaction open on one partition, where `kafka-transactions abort`
    takes it: the partition and the offset it starts at."""

    partition: int
    producer_id: int
    start_offset: int


class KafkaTools:
    """Kafka's tools against ``bootstrap`` (with ``client_config`` for SASL/TLS listeners)."""

    def __init__(self, bootstrap: str, client_config: Mapping[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.client_config = dict(client_config or {})

    def run(self, main: str, *args: str, timeout_s: float = 120) -> str:
        """Run a tool's main class; its stdout (RuntimeError with its stderr if it fails)."""
        with tempfile.TemporaryDirectory(prefix="eoskafka-tool-") as tmp:
            extra: list[str] = []
            if self.client_config:
                props = Path(tmp) / "client.properties"
                props.write_text("".join(f"{k}={v}\n" for k, v in self.client_config.items()))
                flag = "--consumer.config" if main == CONSOLE_CONSUMER else "--command-config"
                extra = [flag, str(props)]
            done = subprocess.run(
                [*_jvm(tmp, short_lived=main != CONSOLE_CONSUMER), main,
                 "--bootstrap-server", self.bootstrap, *extra, *args],
                capture_output=True, timeout=timeout_s,
            )
        if done.returncode != 0:
            raise RuntimeError(
                f"{main.rsplit('.', 1)[-1]} {' '.join(args)} exited {done.returncode}: "
                f"{done.stderr.decode(errors='replace')[-3000:]}"
            )
        return done.stdout.decode(errors="replace")

    def consume(self, topic: str, *, read_committed: bool = True,
                idle_timeout_ms: int = 4000,
                max_messages: int | None = None, include: bool = False) -> list[ConsumedRecord]:
        """Every record of ``topic`` as the Java consumer sees it, from the beginning, until it
        has been idle ``idle_timeout_ms`` (or read ``max_messages``: then a long idle timeout
        costs nothing, which a loaded machine needs for the first fetch); sorted by partition
        and offset. With ``include``, ``topic`` is a regular expression: every matching
        topic in one run (the records do not say which topic they came from)."""
        with tempfile.TemporaryDirectory(prefix="eoskafka-consume-") as tmp:
            out = Path(tmp) / "out"
            cmd = [*_jvm(tmp), CONSOLE_CONSUMER, "--bootstrap-server", self.bootstrap,
                   "--include" if include else "--topic", topic,
                   "--from-beginning", "--timeout-ms", str(idle_timeout_ms),
                   "--command-property",
                   f"isolation.level={'read_committed' if read_committed else 'read_uncommitted'}",
                   "--formatter-property", "print.partition=true",
                   "--formatter-property", "print.offset=true",
                   "--formatter-property", "print.value=true",
                   "--formatter-property", "line.separator=\x1e\n"]
            if max_messages is not None:
                cmd += ["--max-messages", str(max_messages)]
            if self.client_config:
                props = Path(tmp) / "client.properties"
                props.write_text("".join(f"{k}={v}\n" for k, v in self.client_config.items()))
                cmd += ["--consumer.config", str(props)]
            with open(out, "wb") as sink:
                done = subprocess.run(cmd, stdout=sink, stderr=subprocess.PIPE, timeout=300)
            # The console consumer exits 0 on its idle timeout in 4.x (TimeoutException is
            # reported and swallowed); anything else is a real failure.
            if done.returncode != 0:
                raise RuntimeError(f"console consumer on {topic} exited {done.returncode}: "
                                   f"{done.stderr.decode(errors='replace')[-3000:]}")
            return parse_console_output(out.read_bytes())

    def consume_expecting(self, topic: str, count: int) -> list[ConsumedRecord]:
        """Read ``topic`` expecting ``count`` committed records: up to ``count + 1`` (one
        more shows an extra), waiting 3 s of idleness; if fewer came (the idle timeout also
        covers the consumer's group join, slow on a loaded machine), once more, patiently."""
        records = self.consume(topic, idle_timeout_ms=3000, max_messages=count + 1)
        if len(records) < count:
            records = self.consume(topic, idle_timeout_ms=30000, max_messages=count + 1)
        return records

    def transactions(self) -> list[dict[str, str]]:
        """``kafka-transactions list``: one dict per transactional id, keyed by column name."""
        return _table(self.run(TRANSACTIONS, "list"))

    def open_transactions(self) -> list[dict[str, str]]:
        """Transactions whose state (``kafka-transactions list``) says they have not ended."""
        return [row for row in self.transactions() if row.get("TransactionState") in OPEN_STATES]

    def hanging_transactions(self, broker_id: int) -> list[dict[str, str]]:
        """``kafka-transactions find-hanging --broker-id``: transactions open past the maximum
        timeout with no coordinator state (what blocks a read_committed consumer for good)."""
        return _table(self.run(TRANSACTIONS, "find-hanging", "--broker-id", str(broker_id)))

    def abort_transaction(self, topic: str, partition: int, start_offset: int) -> str:
        """``kafka-transactions abort --topic --partition --start-offset``: what an operator
        runs on a hanging transaction. Kafka writes an ABORT marker straight to that one
        partition (its coordinator is not asked: it may still hold the transaction open)."""
        return self.run(TRANSACTIONS, "abort", "--topic", topic, "--partition",
                        str(partition), "--start-offset", str(start_offset))

    def describe_group(self, group: str) -> list[dict[str, str]]:
        """``kafka-consumer-groups --describe --group``: one row per partition (with LAG)."""
        return _table(self.run(CONSUMER_GROUPS, "--describe", "--group", group))

    def describe_producers(self, topic: str, partition: int) -> list[dict[str, str]]:
        """``kafka-transactions describe-producers``: the producers of one partition, with
        ``CurrentTransactionStartOffset`` (-1 when none has a transaction open there)."""
        return _table(self.run(TRANSACTIONS, "describe-producers", "--topic", topic,
                               "--partition", str(partition)))

    def open_on_partitions(self, topic: str,
                           partitions: Iterable[int]) -> Iterator[OpenOnPartition]:
        """The transactions open on ``topic``'s ``partitions`` (describe-producers, one
        partition at a time: a caller that needs one stops after it)."""
        for partition in partitions:
            for row in self.describe_producers(topic, partition):
                start = row.get("CurrentTransactionStartOffset", "-1")  # or "None": none
                if start.isdigit():
                    yield OpenOnPartition(partition, int(row["ProducerId"]), int(start))


def _jvm(tmp: str, *, short_lived: bool = False) -> list[str]:
    """An admin tool's JVM lives a second or two: lean (a suite runs hundreds of them). The
    console consumer keeps the defaults: it may read millions of records."""
    log_config = Path(tmp) / "log4j2.properties"
    log_config.write_text(_LOG4J2)
    return [require_java(), "-Xmx512m", *(LEAN_JVM_OPTIONS if short_lived else ()),
            f"-Dlog4j2.configurationFile={log_config}", "-cp", classpath(DEFAULT_VERSION)]


def parse_console_output(raw: bytes) -> list[ConsumedRecord]:
    """Parse ``Partition:P<TAB>Offset:O<TAB>value<RS><LF>`` records (values may hold newlines).

    The tool also prints to stdout: a deprecation notice before the first record and, at its
    idle timeout, an ERROR line with TimeoutException. Only well-formed records count.
    """
    records = [ConsumedRecord(int(m.group(1)), int(m.group(2)), m.group(3))
               for m in _RECORD.finditer(raw)]
    records.sort(key=lambda r: (r.partition, r.offset))
    return records


_RECORD = re.compile(rb"Partition:(\d+)\tOffset:(\d+)\t(.*?)\x1e\n", re.DOTALL)


def _table(text: str) -> list[dict[str, str]]:
    """Kafka's tools print a header line and whitespace-separated columns."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    header = lines[0].split()
    return [dict(zip(header, ln.split(), strict=False)) for ln in lines[1:]]
