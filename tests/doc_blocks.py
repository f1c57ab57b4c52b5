"""The fenced code blocks and relative links of README.md and docs/*.md, for the docs tests.

A ``bash``/``sh``/``python`` block is either run by a test, which takes its text from
here (never a copy), and is listed in :data:`RUN`, or marked ``<!-- illustration -->``
on the line before its fence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ILLUSTRATION = "<!-- illustration -->"
CHECKED_LANGS = frozenset({"bash", "sh", "shell", "console", "python", "py", "pycon"})
_FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)")

#: Blocks run by a test: (page, first line of the block) -> the test that runs it.
RUN = {
    ("README.md", "# quickstart.py: copy a Kafka topic exactly once with Spark, from nothing."):
        "tests/deploy/test_wheel.py::test_readme_quick_start_runs_as_written",
    ("README.md", "# in the clone: dist/eoskafka-<version>-py3-none-any.whl and "
                  "dist/eoskafka-<version>.tar.gz"):
        "tests/deploy/test_wheel.py::test_readme_quick_start_runs_as_written",
    ("README.md", 'df = (spark.readStream.format("eoskafka")'):
        "tests/spark/test_docs_snippets.py::test_readme_read_and_write",
    ("README.md", "import eos_kafka_source"):
        "tests/spark/test_docs_snippets.py::test_readme_read_and_write",
    ("README.md", 'query = (df.selectExpr("key", "upper(CAST(value AS STRING)) AS value")'):
        "tests/spark/test_docs_snippets.py::test_readme_read_and_write",
    ("docs/scale.md", "from pyspark.sql import functions as F"):
        "tests/spark/test_docs_snippets.py::test_scale_routing_recipe",
    ("docs/walkthrough.md", "# 1. a session whose Python workers can import eoskafka"):
        "tests/spark/test_docs_snippets.py::test_walkthrough",
    ("docs/operations.md",
     "# eoskafka checks: CHECKPOINT, OUTPUT and EOSKAFKA_BOOTSTRAP set by the caller"):
        "tests/broker/test_cli.py::test_the_alert_script_of_the_operations_page",
    ("docs/formats.md", 'orders = (spark.readStream.format("eoskafka")'):
        "tests/formats/test_docs_formats.py::test_read_and_write_blocks",
    ("docs/formats.md", 'query = (orders.select("value")'):
        "tests/formats/test_docs_formats.py::test_read_and_write_blocks",
    ("docs/formats.md", 'rows = (spark.readStream.format("eoskafka")'):
        "tests/formats/test_docs_formats.py::test_dead_letter_recipe",
    ("docs/walkthrough.md", "# 5. inspect from a terminal"):
        "tests/spark/test_docs_snippets.py::test_walkthrough",
    **{("docs/security.md", first): f"tests/broker/test_docs_security.py::{test}"
       for first, test in (
           ("scram = {", "test_scram_block"),
           ("kerberos = {", "test_kerberos_block"),
           ("oauth = {", "test_oauth_block"),
           ("provided = {", "test_cloud_providers"),
           ("# mytokens.py (AWS MSK IAM)", "test_cloud_providers"),
           ("# mytokens.py (Azure Event Hubs)", "test_cloud_providers"),
           ("# mytokens.py (GCP)", "test_gcp_provider_envelope"),
           ("from eos_kafka_source.wire.delegation import TokenRenewer, create_token",
            "test_delegation_block"))},
}


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    illustration: bool

    @property
    def first_line(self) -> str:
        return next((ln for ln in self.text.splitlines() if ln.strip()), "")

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, in order."""
    lines = page.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2).lower(), i
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        before = next((ln.strip() for ln in reversed(lines[:start]) if ln.strip()), "")
        out.append(Block(str(page.relative_to(ROOT)), start + 1, lang, "\n".join(body) + "\n",
                         before == ILLUSTRATION))
        i += 1
    return out


def all_blocks() -> list[Block]:
    return [b for page in pages() for b in blocks(page)]


def block(page: str, first_line: str) -> Block:
    """The block of ``page`` that starts with ``first_line`` (a key of :data:`RUN`)."""
    found = [b for b in blocks(ROOT / page) if b.first_line == first_line]
    assert len(found) == 1, f"{page}: {len(found)} blocks start with {first_line!r}"
    return found[0]


_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def links(page: Path) -> list[tuple[int, str]]:
    """(line, target) of every markdown link outside code blocks."""
    out, fenced = [], False
    for n, line in enumerate(page.read_text().splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out += [(n, m.group(1)) for m in _LINK.finditer(re.sub(r"`[^`]*`", "", line))]
    return out


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for the headings of ``page``."""
    out, fenced = set(), False
    for line in page.read_text().splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else _HEADING.match(line)
        if m:
            text = m.group(1).lower()
            out.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return out
