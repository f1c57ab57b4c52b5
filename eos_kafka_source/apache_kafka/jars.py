"""Apache Kafka's jars, fetched from Maven Central once with ``mvn`` and cached outside the repo.

The cache is ``$EOSKAFKA_CACHE`` (default ``~/.cache/eoskafka``)/``kafka-<version>/``;
a ``.complete`` file marks a finished fetch, and a file lock keeps two test
sessions from fetching into the same folder at once.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import EosKafkaError

#: Pinned versions: 4.4.x (the reference), 4.3.x (transaction protocol version 2
#: finalized by default in both) and 3.9.x (the classic protocol only). Short names map
#: to the pinned patch release.
SUPPORTED_VERSIONS = {"4.4": "4.4.0", "4.3": "4.3.1", "3.9": "3.9.1"}
DEFAULT_VERSION = SUPPORTED_VERSIONS["4.4"]

#: Kafka 4.x logs through log4j2 but its pom brings no SLF4J binding; 3.9 brings reload4j.
_LOG_BINDING = {"4": ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.25.4")}

_MAVEN_TIMEOUT_S = 900

#: For a JVM that lives seconds or carries a light load (an admin tool; a test's broker,
#: Spark driver or Spark Connect server): the C1 compiler alone, the serial collector, no
#: perf data file. Measured 2026-11-26 on two cores: a `kafka-transactions list` 2.1 -> 1.5
#: CPU-s; a 1-node Kafka 4.4 started and given 40,000 transactional records 11.5-12.0 ->
#: 6.2-7.5 CPU-s; the tests' Spark driver through tests/spark/test_source_batch.py 32.9 ->
#: 16.6 CPU-s. Peak throughput is what it costs: never for a benchmark.
LEAN_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData")


class KafkaToolsMissingError(EosKafkaError):
    """Java or Maven, needed to run Apache Kafka, is not installed."""

    condition = "EOSKAFKA_KAFKA_NEEDS_JAVA"


def resolve_version(version: str | None) -> str:
    """``None``/``"4.4"``/``"4.4.0"`` -> a pinned full version; anything else is refused."""
    if not version:
        return DEFAULT_VERSION
    if version in SUPPORTED_VERSIONS:
        return SUPPORTED_VERSIONS[version]
    if version in SUPPORTED_VERSIONS.values():
        return version
    raise EosKafkaError(
        f"Apache Kafka {version} is not one of the pinned versions "
        f"({', '.join(sorted(SUPPORTED_VERSIONS.values()))}); pass one of "
        f"{', '.join(sorted(SUPPORTED_VERSIONS))}"
    )


def cache_root() -> Path:
    return Path(os.environ.get("EOSKAFKA_CACHE") or Path.home() / ".cache" / "eoskafka")


def require_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise KafkaToolsMissingError(
            "Apache Kafka runs on the JVM and `java` (17 or newer) is not on PATH: install a "
            "JDK 17, or use the embedded broker (`eoskafka broker`, Tansu), which needs neither "
            "Java nor Maven"
        )
    return java


def _pom(version: str) -> str:
    deps = [("org.apache.kafka", "kafka_2.13", version),
            ("org.apache.kafka", "kafka-tools", version)]
    if version.split(".")[0] in _LOG_BINDING:
        deps.append(_LOG_BINDING[version.split(".")[0]])
    body = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in deps
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>eoskafka</groupId><artifactId>kafka-jars</artifactId><version>1</version>
  <dependencies>
{body}
  </dependencies>
</project>
"""


def kafka_jars(version: str | None = None) -> Path:
    """The folder holding every runtime jar of Apache Kafka ``version`` (fetched if needed)."""
    version = resolve_version(version)
    target = cache_root() / f"kafka-{version}"
    if not (target / ".complete").exists():
        maven_fetch(_pom(version), target, what=f"Apache Kafka {version}",
                    hint="is Maven Central reachable?")
    return target


def maven_fetch(pom: str, target: Path, *, what: str, hint: str) -> None:
    """Copy every runtime dependency of ``pom`` into ``target`` with ``mvn``, once: a
    ``.complete`` file marks a finished fetch, a file lock serialises concurrent ones,
    and a failed fetch leaves nothing behind (it stages beside ``target``)."""
    require_java()
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaToolsMissingError(
            f"{what} is fetched from Maven Central with `mvn`, which is not on PATH: install "
            f"Maven, or put its jars in {target} with an empty `.complete` file, or use the "
            f"embedded broker (Tansu), which needs neither Java nor Maven"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").exists():
            return
        with tempfile.TemporaryDirectory(prefix="eoskafka-pom-") as tmp:
            (Path(tmp) / "pom.xml").write_text(pom)
            staging = target.with_name(target.name + ".partial")
            shutil.rmtree(staging, ignore_errors=True)
            done = subprocess.run(
                [mvn, "-q", "-B", "dependency:copy-dependencies",
                 f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
                cwd=tmp, capture_output=True, text=True, timeout=_MAVEN_TIMEOUT_S,
            )
            if done.returncode != 0:
                tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
                raise EosKafkaError(
                    f"fetching {what} from Maven Central failed (mvn exit {done.returncode}); "
                    f"{hint} Last lines:\n" + "\n".join(tail)
                )
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
            (target / ".complete").write_text(what + "\n")


def classpath(version: str | None = None) -> str:
    return str(kafka_jars(version) / "*")
