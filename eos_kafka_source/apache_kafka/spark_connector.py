"""Spark's own Kafka connector (``format("kafka")``), fetched from Maven Central and cached.

The peer users would pick instead of eoskafka: the differential tests and the
benchmarks run both side by side in one SparkSession. Jars come like Kafka's
(:mod:`.jars`): a small pom, ``mvn dependency:copy-dependencies``, a folder under
``$EOSKAFKA_CACHE`` (default ``~/.cache/eoskafka``)/``spark-sql-kafka-<version>/``.
Only the jars pyspark does not already ship are kept (the connector's pom also
pulls Scala, Hadoop and SLF4J, which would then sit twice on the classpath).

Version. ``spark-sql-kafka-0-10_2.13`` is used at the installed pyspark's version
when Maven Central serves it; pyspark 4.3.0 has no published connector (checked
2026-11-23: the newest is 4.2.0), so newer pysparks get :data:`NEWEST_PUBLISHED`.
Set ``EOSKAFKA_SPARK_CONNECTOR_VERSION`` to force another one.

>>> spark = SparkSession.builder.config("spark.jars", spark_jars()).getOrCreate()  # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .jars import cache_root, maven_fetch

#: The newest ``spark-sql-kafka-0-10_2.13`` on Maven Central when this was written.
NEWEST_PUBLISHED = "4.2.0"
_ARTIFACT = ("org.apache.spark", "spark-sql-kafka-0-10_2.13")
#: Spark's Avro functions (``from_avro``/``to_avro``), same version: the formats tests
#: compare them with eoskafka's own Avro decoding (tests/formats/).
AVRO_ARTIFACT = ("org.apache.spark", "spark-avro_2.13")
_MAVEN_TIMEOUT_S = 900
#: name-version.jar, the version starting with digits.digits (``_2.13`` is part of names).
_JAR = re.compile(r"(.+?)-(\d+\.\d+[^-]*(?:-[A-Za-z0-9.]+)?)\.jar")


def _as_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("-")[0].split(".")[:3] if p.isdigit())


def connector_version(pyspark_version: str | None = None) -> str:
    """The connector version for ``pyspark_version`` (default: the installed pyspark)."""
    forced = os.environ.get("EOSKAFKA_SPARK_CONNECTOR_VERSION")
    if forced:
        return forced
    if pyspark_version is None:
        import pyspark

        pyspark_version = pyspark.__version__
    if _as_tuple(pyspark_version) > _as_tuple(NEWEST_PUBLISHED):
        return NEWEST_PUBLISHED
    return pyspark_version


def _pom(version: str, coordinates: tuple[str, str] = _ARTIFACT) -> str:
    group, artifact = coordinates
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>eoskafka</groupId><artifactId>spark-kafka-jars</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>
      <version>{version}</version></dependency>
  </dependencies>
</project>
"""


def _artifact_name(jar: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients`` (the name before the version)."""
    m = _JAR.fullmatch(jar)
    return m.group(1) if m else jar


def _shipped_by_pyspark() -> set[str]:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return {_artifact_name(p.name) for p in jars.glob("*.jar")}


def connector_jars(version: str | None = None,
                   coordinates: tuple[str, str] = _ARTIFACT) -> list[Path]:
    """The jars to add to ``spark.jars`` for ``format("kafka")`` (fetched on first use), or
    for another Spark artifact of the same version (``coordinates``: spark-avro)."""
    version = version or connector_version()
    name = "spark-sql-kafka" if coordinates == _ARTIFACT else coordinates[1].split("_")[0]
    target = cache_root() / f"{name}-{version}"
    if not (target / ".complete").exists():
        _fetch(version, target, coordinates)
    shipped = _shipped_by_pyspark()
    return sorted(p for p in target.glob("*.jar") if _artifact_name(p.name) not in shipped)


def spark_jars(version: str | None = None, *, avro: bool = False) -> str:
    """``connector_jars`` as the comma-separated value ``spark.jars`` takes; ``avro`` adds
    spark-avro's."""
    jars = connector_jars(version)
    if avro:
        jars += [j for j in connector_jars(version, AVRO_ARTIFACT) if j not in jars]
    return ",".join(str(p) for p in jars)


def _fetch(version: str, target: Path, coordinates: tuple[str, str] = _ARTIFACT) -> None:
    maven_fetch(_pom(version, coordinates), target, what=f"{coordinates[1]} {version}",
                hint="is it published for this Spark version (set "
                     "EOSKAFKA_SPARK_CONNECTOR_VERSION to one that is)?")
