"""At-least-once vs exactly-once, measured: ``make contrast``
(``python -m benchmarks.availability contrast``).

The same copy job (``benchmarks/availability/contrast_job.py``: Spark's Kafka source ->
pass-through -> sink, AvailableNow, 3 batches of 2,000) runs once per sink and
fault schedule against one Apache Kafka broker started here:

* no fault;
* a task retried after it wrote (task 0 of batch 1 fails half-way, Spark retries it);
* the driver killed between the sink's output and Spark's commit log (batch 1),
  then the job restarted from its checkpoint.

Duplicates are counted from the outside, with an independent read_committed
consumer (kafka-python's KafkaConsumer): every input value must appear exactly once in the output.
Writes ``bench-results/contrast.md`` and the table between docs/performance.md's
``contrast`` markers.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.apache_kafka.jars import cache_root
from eos_kafka_source.apache_kafka.spark_connector import connector_version, spark_jars
from eos_kafka_source.client.config import ClientConfig

from ..common import KAFKA_LABEL, KAFKA_VERSION, ready_topic
from ..throughput.versus import into_readme

ROOT = Path(__file__).parents[2]
FAULT_SOURCE = Path(__file__).with_name("java") / "KillBeforeCommitLog.java"
OUT = Path("bench-results/contrast.md")
RECORDS_PER_PARTITION = 2000
PARTITIONS = 3
SINKS = {"kafka": "Spark's built-in `kafka` sink (at-least-once)",
         "eoskafka": "`eoskafka` sink (exactly-once)"}
FAULTS = {"none": "no fault",
          "task": "task retried after it wrote (batch 1, task 0, half-way)",
          "kill": "driver killed between the output and Spark's commit log (batch 1), restarted"}


def fault_jar() -> Path:
    """Compile ``java/KillBeforeCommitLog.java`` against pyspark's jars (cached)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    target = cache_root() / f"contrast-faults-{pyspark.__version__}"
    jar = target / "faults.jar"
    if jar.exists() and jar.stat().st_mtime >= FAULT_SOURCE.stat().st_mtime:
        return jar
    classes = target / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    subprocess.run(["javac", "-d", str(classes), "-cp", f"{jars}/*", str(FAULT_SOURCE)],
                   check=True, capture_output=True)
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "eoskafka"], check=True)
    return jar


@dataclass
class Outcome:
    sink: str
    fault: str
    expected: int
    distinct: int
    total: int
    fired: bool
    exits: list[int]

    @property
    def duplicates(self) -> int:
        return self.total - self.distinct

    @property
    def missing(self) -> int:
        return self.expected - self.distinct


def run_job(fmt: str, bootstrap: str, src: str, out: str, ckpt: Path, jars: str,
            env_extra: dict[str, str]) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env_extra}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.availability.contrast_job", fmt, bootstrap, src, out,
         str(ckpt), jars],
        env=env, cwd=ROOT, capture_output=True, timeout=900, start_new_session=True)
    if proc.returncode not in (0, 137) or os.environ.get("EOSKAFKA_CONTRAST_VERBOSE"):
        print(proc.stdout.decode()[-2000:], proc.stderr.decode()[-4000:])
    return proc.returncode


def scenario(fmt: str, fault: str, bootstrap: str, jars: str, work: Path,
             expected: Counter[bytes], src: str) -> Outcome:
    cfg = ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})
    out = ready_topic(cfg, f"out-{fmt}-{fault}", PARTITIONS)
    ckpt = work / f"ckpt-{fmt}-{fault}"
    flag = work / f"fired-{fmt}-{fault}"
    env = {"task": {"CONTRAST_TASK_FAULT": f"1@{flag}"},
           "kill": {"EOSKAFKA_KILL_BEFORE_COMMIT_LOG": f"1@{flag}"}}.get(fault, {})
    exits = [run_job(fmt, bootstrap, src, out, ckpt, jars, env)]
    if fault == "kill":
        exits.append(run_job(fmt, bootstrap, src, out, ckpt, jars, {}))
    got = Counter(consume_committed(bootstrap, out))
    return Outcome(fmt, fault, sum(expected.values()), len(got), sum(got.values()),
                   fault == "none" or flag.exists(), exits)


def consume_committed(bootstrap: str, topic: str) -> list[bytes]:
    """Every value of ``topic`` a read_committed Java-protocol consumer sees (kafka-python's
    KafkaConsumer: an independent client, which on Apache Kafka honours the broker's
    aborted-transaction lists), from the beginning to the last stable offset."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, group_id=None)
    try:
        parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)  # the LSO under read_committed
        values: list[bytes] = []
        deadline = time.monotonic() + 300
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            assert time.monotonic() < deadline, f"reading {topic} did not reach its end"
            for records in consumer.poll(timeout_ms=1000).values():
                values.extend(r.value for r in records)
        return values
    finally:
        consumer.close()


def table(outcomes: list[Outcome]) -> list[str]:
    lines = ["| fault | sink | records in | records out | duplicates | missing | "
             "fault fired | driver exits |", "|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        lines.append(f"| {FAULTS[o.fault]} | {SINKS[o.sink]} | {o.expected:,} | {o.total:,} | "
                     f"**{o.duplicates:,}** | {o.missing:,} | {'yes' if o.fired else 'NO'} | "
                     f"{', '.join(map(str, o.exits))} |")
    return lines


def write_report(outcomes: list[Outcome], header: list[str]) -> None:
    body = header + [""] + table(outcomes)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(body) + "\n")
    into_readme("contrast", body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.availability contrast",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--faults", default="task,kill")
    parser.add_argument("--sinks", default="kafka,eoskafka")
    args = parser.parse_args(argv)
    jars = ",".join([spark_jars(), str(fault_jar())])
    outcomes: list[Outcome] = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="eoskafka-contrast-") as tmp, \
            KafkaCluster(nodes=1, version=KAFKA_VERSION) as kafka:
        bootstrap = kafka.bootstrap_servers
        cfg = ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})
        src = ready_topic(cfg, "input", PARTITIONS)
        expected = write_input(bootstrap, src)
        for fault in args.faults.split(","):
            for fmt in args.sinks.split(","):
                print(f"{fault} / {fmt}", flush=True)
                outcomes.append(scenario(fmt, fault, bootstrap, jars, Path(tmp), expected, src))
                print("\n".join(table(outcomes[-1:])[2:]), flush=True)
    import pyspark

    header = [f"Measured {started} by `make contrast` (benchmarks/availability/contrast.py): "
              f"pyspark {pyspark.__version__} local[2,3], spark-sql-kafka-0-10_2.13 "
              f"{connector_version()}, {KAFKA_LABEL} (1 node). Input: "
              f"{PARTITIONS * RECORDS_PER_PARTITION:,} distinct values, read in 3 batches of "
              "2,000 by Spark's Kafka source; output counted with kafka-python's KafkaConsumer "
              "(read_committed)."]
    write_report(outcomes, header)
    print("\n".join(table(outcomes)))
    return 0


def write_input(bootstrap: str, topic: str) -> Counter[bytes]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    values = [f"v-{p}-{i:05d}".encode() for p in range(PARTITIONS)
              for i in range(RECORDS_PER_PARTITION)]
    try:
        for i, v in enumerate(values):
            producer.send(topic, value=v, partition=i // RECORDS_PER_PARTITION)
        producer.flush()
    finally:
        producer.close(timeout=10)
    return Counter(values)


if __name__ == "__main__":
    raise SystemExit(main())
