"""The supported-versions table of docs/compatibility.md, generated from what CI runs.

Reads ``.ci/run`` (the lanes' make targets, the smoke set's pyspark) and the Makefile (the
test files of each older Kafka's subset), so the page claims exactly what CI tests; every
other version is "untested". ``tests/unit/test_docs.py`` fails when the page differs.

    python -m tests.versions_tested            # print the table
    python -m tests.versions_tested --write    # rewrite it in docs/compatibility.md
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from eos_kafka_source.apache_kafka.jars import SUPPORTED_VERSIONS
from tests.schema_registry import VERSION as APICURIO_VERSION

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "compatibility.md"
BEGIN, END = "<!-- versions:begin -->", "<!-- versions:end -->"
#: Minor releases of pyspark eoskafka supports (pyproject: pyspark>=4.0): the newest is
#: what `make setup` installs.
PYSPARK_MINORS = ("4.0", "4.1", "4.2", "4.3")
#: Python versions pyproject's classifiers name.
PYTHONS = ("3.11", "3.12", "3.13")
#: What each make target CI runs tests, in words.
TARGETS = {
    "test-kafka": "every broker and Spark test",
    "test-kafka-faults-broker": "the broker-level fault cases (3-node failover, timeouts, "
                                "the crash-point sweep, the sequence explorer)",
    "test-kafka-faults-spark": "the Spark-level fault cases (driver kills)",
    "chaos": "the chaos round (3 nodes)",
    "chaos-operator": "the operator round (3 nodes)",
    "failover": "the failover check (3 nodes, a kill at every commit step)",
    "test-tansu": "unit and deployment tests, the sink protocol, the smoke and Tansu-only "
                  "cases",
}


def ci_targets() -> list[str]:
    text = (ROOT / ".ci" / "run").read_text()
    lanes = re.findall(r'LANE[12]="([^"]*)"', text)
    return [t for lane in lanes for t in lane.split()]


def ci_smoke_pyspark() -> list[str]:
    m = re.search(r"\bSMOKE_SPARK=([\d. ]+?)\s", (ROOT / ".ci" / "run").read_text())
    return m.group(1).split() if m else []


def make_list(name: str) -> list[str]:
    """A ``NAME := a b \\ c`` list of the Makefile."""
    text = (ROOT / "Makefile").read_text()
    m = re.search(rf"^{name} :=((?:.*\\\n)*.*)$", text, re.M)
    assert m, f"Makefile has no {name}"
    return m.group(1).replace("\\\n", " ").split()


def rows() -> list[tuple[str, str]]:
    targets = ci_targets()
    out: list[tuple[str, str]] = []
    for minor, full in SUPPORTED_VERSIONS.items():
        if minor == "4.4":
            ran = [TARGETS.get(t, t) for t in targets if t in TARGETS and t != "test-tansu"]
            what = "; ".join(ran) if ran else "untested"
            out.append((f"Apache Kafka {full} (the reference)", what))
            continue
        target = f"test-kafka{minor.replace('.', '')}"
        if target in targets:
            files = make_list(f"KAFKA{minor.replace('.', '')}_TESTS")
            names = ", ".join(f"`{Path(f).stem.removeprefix('test_')}`" for f in files)
            out.append((f"Apache Kafka {full}", f"a subset: {names}"))
        else:
            out.append((f"Apache Kafka {full}", "untested"))
    if "test-tansu" in targets:
        out.append(("Tansu 0.6.0 (embedded, development)", TARGETS["test-tansu"]))
    if "test-kafka" in targets:
        out.append((f"Apicurio Registry {APICURIO_VERSION} (Confluent-compatible API)",
                    "the schema'd-payload tests (Avro, Protobuf, JSON Schema) on Kafka 4.4; an "
                    "Avro round trip in the smoke set"))
        out.append(("Confluent Schema Registry", "untested (the same REST API; Confluent's own "
                    "Python serializers are tested against Apicurio)"))
    smoke = ci_smoke_pyspark()
    for minor in PYSPARK_MINORS:
        if minor == PYSPARK_MINORS[-1]:
            out.append((f"pyspark {minor}.x (the newest)", "every Spark test, on Kafka 4.4"))
        elif minor in smoke:
            out.append((f"pyspark {minor}.x", "the smoke set (reads, exactly-once writes, "
                        "AvailableNow, Spark Connect, Avro)"))
        else:
            out.append((f"pyspark {minor}.x", "untested in CI (`make smoke-spark "
                        f"SMOKE_SPARK={minor}` runs the smoke set)"))
    for python in PYTHONS:
        out.append((f"Python {python}", "everything above" if python == PYTHONS[0]
                    else "untested"))
    return out


def render() -> str:
    lines = ["| version | what CI runs on it |", "|---|---|"]
    lines += [f"| {v} | {what} |" for v, what in rows()]
    return "\n".join(lines)


def replaced(page: str) -> str:
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{render()}\n{END}{tail}"


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        PAGE.write_text(replaced(PAGE.read_text()))
    else:
        print(render())
