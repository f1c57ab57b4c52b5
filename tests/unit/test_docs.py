"""The docs cannot drift: option reference, snippets, command lines and links.

* docs/options.md's tables are :func:`eos_kafka_source.options.reference.render`, and
  that names every option the parsers accept, with the defaults they parse to.
* Every bash/sh/python block in README.md and docs/*.md is run by a test (tests/doc_blocks.py
  ``RUN``) or marked ``<!-- illustration -->``; every python block compiles, and every
  ``eoskafka ...`` line parses with the CLI's own argument parser.
* Every relative link points at a file that exists, and at a heading that exists.
"""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import pytest

from eos_kafka_source.cli import build_parser
from eos_kafka_source.client.keys import WRITER_KEYS
from eos_kafka_source.client.table import HONOURED, TABLE, honoured
from eos_kafka_source.errors import ConfigError
from eos_kafka_source.options import SinkOptions, SourceOptions
from eos_kafka_source.options import reference as ref
from tests import doc_blocks as docs

BOOT = {"kafka.bootstrap.servers": "b1:9092"}

# -- option reference ----------------------------------------------------------------------------


def test_options_page_is_the_generated_reference() -> None:
    text = ref.PAGE.read_text()
    assert ref.BEGIN in text and ref.END in text
    assert ref.splice(text) == text, (
        "docs/options.md is not what eos_kafka_source/options/reference.py renders; run "
        "`python -m eos_kafka_source.options.reference --write`")


def test_every_accepted_option_has_a_line_and_every_line_is_accepted() -> None:
    accepted = ref.accepted_names()
    assert {o.name for o in ref.SOURCE} == accepted["source"]
    assert {o.name for o in ref.SINK} == accepted["sink"]
    assert {o.name for o in ref.CONNECTION} == accepted["connection"]
    assert {o.name for o in ref.REGISTRY} == accepted["registry"]
    kafka = {o.name for o in ref.CONNECTION + ref.SOURCE_KAFKA + ref.SINK_KAFKA}
    assert kafka == set(honoured())
    # every other key of the table is in the refused table, with its reason
    rows = [line for line in ref.render().splitlines() if line.startswith("| `kafka.")]
    for name, key in TABLE.items():
        if key.status != HONOURED:
            assert any(f"`kafka.{name}`" in row.split(" | ")[0]
                       and row.endswith(f" | {key.status} | {key.text} |") for row in rows), name


def test_settings_the_code_reads_from_extra_are_honoured() -> None:
    """A Java client setting a module reads from ``ClientConfig.extra`` has its own line."""
    pattern = re.compile(r"""extra(?:\.get\(|\[)\s*["']([a-z]+\.[a-z.]+)["']""")
    read = {m.group(1) for path in (docs.ROOT / "eos_kafka_source").rglob("*.py")
            for m in pattern.finditer(path.read_text())}
    assert read, "no extra.get(...) found: the pattern is stale"
    assert read <= {o.name for o in ref.SOURCE_KAFKA + ref.SINK_KAFKA + ref.CONNECTION}
    assert read <= WRITER_KEYS


def _not_unknown(parse, options: dict[str, str]) -> None:
    """The parser may refuse the value, never the name."""
    try:
        parse(options)
    except ConfigError as exc:
        assert "unknown option" not in str(exc), exc


@pytest.mark.parametrize("opt", ref.SOURCE, ids=lambda o: o.name)
def test_documented_source_options_are_known_to_the_parser(opt: ref.Opt) -> None:
    _not_unknown(lambda o: SourceOptions.parse(o, streaming=True),
                 {**BOOT, "subscribe": "t", opt.name: "x"})


@pytest.mark.parametrize("opt", ref.SINK, ids=lambda o: o.name)
def test_documented_sink_options_are_known_to_the_parser(opt: ref.Opt) -> None:
    _not_unknown(SinkOptions.parse, {**BOOT, opt.name: "x"})


@pytest.mark.parametrize("opt", ref.CONNECTION + ref.SOURCE_KAFKA, ids=lambda o: o.name)
def test_documented_kafka_settings_are_known_to_the_source(opt: ref.Opt) -> None:
    _not_unknown(lambda o: SourceOptions.parse(o, streaming=True),
                 {**BOOT, "subscribe": "t", ref.PREFIX + opt.name: "x"})


@pytest.mark.parametrize("opt", ref.SINK_KAFKA, ids=lambda o: o.name)
def test_documented_kafka_settings_are_known_to_the_sink(opt: ref.Opt) -> None:
    _not_unknown(SinkOptions.parse, {**BOOT, ref.PREFIX + opt.name: "x"})


def _parsed_default(check: str) -> object:
    where, _, path = check.partition(":")
    if where == "const":
        module, _, name = path.partition(":")
        return getattr(importlib.import_module(module), name)
    obj: object = {
        "stream": SourceOptions.parse({**BOOT, "subscribe": "t"}, streaming=True),
        "batch": SourceOptions.parse({**BOOT, "subscribe": "t"}, streaming=False),
        "sink": SinkOptions.parse(BOOT),
    }[where]
    for attr in path.split("."):
        obj = getattr(obj, attr)
    return obj


def _shown(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


CHECKED = [o for o in ref.SOURCE + ref.SINK + ref.CONNECTION + ref.SOURCE_KAFKA
           + ref.SINK_KAFKA + ref.REGISTRY if o.check]


@pytest.mark.parametrize("opt", CHECKED, ids=lambda o: o.name)
def test_documented_default_is_the_parsed_default(opt: ref.Opt) -> None:
    assert opt.check is not None
    value = _shown(_parsed_default(opt.check))
    assert value in opt.default, f"{opt.name}: the code's default is {value}, the doc says " \
                                 f"{opt.default!r}"


def test_defaults_are_checked_where_the_code_has_one() -> None:
    """A new option with a default gets a ``check`` too (most do; this keeps it so)."""
    assert len(CHECKED) >= 24


# -- snippets ------------------------------------------------------------------------------------

CHECKED_BLOCKS = [b for b in docs.all_blocks() if b.lang in docs.CHECKED_LANGS]


def test_docs_have_blocks_to_check() -> None:
    assert len(CHECKED_BLOCKS) >= 10
    assert {"README.md", "docs/operations.md"} <= {b.page for b in CHECKED_BLOCKS}


@pytest.mark.parametrize("block", CHECKED_BLOCKS, ids=lambda b: b.where)
def test_every_snippet_is_run_or_marked_an_illustration(block: docs.Block) -> None:
    run = docs.RUN.get((block.page, block.first_line))
    assert block.illustration or run, (
        f"{block.where}: a {block.lang} block neither run by a test (tests/doc_blocks.py RUN) "
        f"nor marked {docs.ILLUSTRATION} on the line before its fence")
    assert not (block.illustration and run), f"{block.where}: marked, yet listed as run"


def test_every_listed_snippet_exists() -> None:
    for page, first in docs.RUN:
        docs.block(page, first)  # exactly one block starts so


@pytest.mark.parametrize("block", [b for b in CHECKED_BLOCKS if b.lang in ("python", "py")],
                         ids=lambda b: b.where)
def test_python_snippets_compile(block: docs.Block) -> None:
    compile(block.text, block.where, "exec")


def _cli_lines() -> list[tuple[str, str]]:
    out = []
    for b in CHECKED_BLOCKS:
        if b.lang in ("python", "py"):
            continue
        for line in b.text.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("eoskafka "):
                out.append((b.where, line))
    return out


@pytest.mark.parametrize(("where", "line"), _cli_lines(), ids=lambda v: v)
def test_eoskafka_command_lines_parse(where: str, line: str) -> None:
    """Every ``eoskafka ...`` line in the docs is valid for today's CLI (parsed, not run)."""
    try:
        build_parser().parse_args(shlex.split(line)[1:])
    except SystemExit as exc:  # argparse's way of refusing (0: --version or --help)
        if exc.code != 0:
            pytest.fail(f"{where}: `{line}` does not parse ({exc})")


def test_cli_lines_found() -> None:
    assert len(_cli_lines()) >= 10


# -- links ---------------------------------------------------------------------------------------


def _relative_links() -> list[tuple[Path, int, str]]:
    out = []
    for page in docs.pages():
        for n, target in docs.links(page):
            if not target.startswith(("http://", "https://", "mailto:")):
                out.append((page, n, target))
    return out


def test_docs_have_links() -> None:
    assert len(_relative_links()) >= 30


@pytest.mark.parametrize(("page", "line", "target"), _relative_links(),
                         ids=lambda v: str(v.name if isinstance(v, Path) else v))
def test_relative_links_resolve(page: Path, line: int, target: str) -> None:
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    where = f"{page.relative_to(docs.ROOT)}:{line}"
    assert dest.is_relative_to(docs.ROOT), f"{where}: link to {target} leaves the repository"
    assert dest.exists(), f"{where}: link to {target}: no such file"
    if anchor and dest.suffix == ".md":
        assert anchor in docs.anchors(dest), f"{where}: link to {target}: no such heading"


@pytest.mark.parametrize("page", [*docs.pages(), docs.ROOT / "CHANGELOG.md"],
                         ids=lambda p: p.name)
def test_docs_stand_alone(page: Path) -> None:
    """The docs cite the project's own design page, never notes outside the repository."""
    text = page.read_text()
    for outside in ("DESIGN.md", "../shared", "/work/", "STYLE.md"):
        assert outside not in text, f"{page.name} refers to {outside!r}: cite docs/design.md"


def test_glossary_terms_have_their_entries() -> None:
    """docs/glossary.md defines every term the docs use before explaining it, and the pages
    link to it."""
    anchors = docs.anchors(docs.ROOT / "docs" / "glossary.md")
    terms = {"hand-off", "decided", "fencing", "zombie", "id-pool", "claim", "abort-mark",
             "generation-1", "tansu", "lineage", "roll-forward", "lso", "marker",
             "read_committed", "read-bound", "transactional-id-prefix", "fencing-epoch",
             "replay", "decision-log", "task-slot", "one-wave", "lanes", "floor"}
    assert terms <= anchors, terms - anchors
    linking = {p.name for p in docs.pages() for _, t in docs.links(p) if "glossary.md#" in t}
    assert {"README.md", "operations.md", "cli.md", "cluster.md"} <= linking


_CITED = re.compile(r"docs/([a-z_]+\.md)(?:#([\w-]+))?")


def _cited_in_code() -> list[tuple[str, str, str]]:
    out = []
    for path in sorted((docs.ROOT / "eos_kafka_source").rglob("*.py")):
        for m in _CITED.finditer(path.read_text()):
            out.append((str(path.relative_to(docs.ROOT)), m.group(1), m.group(2) or ""))
    return out


def test_code_cites_docs() -> None:
    assert any(anchor for _, _, anchor in _cited_in_code()), "the pattern is stale"


@pytest.mark.parametrize(("where", "page", "anchor"), _cited_in_code(), ids=lambda v: v)
def test_docs_cited_in_code_exist(where: str, page: str, anchor: str) -> None:
    """Every ``docs/<page>.md#anchor`` a message or docstring cites is a page and a heading."""
    dest = docs.ROOT / "docs" / page
    assert dest.exists(), f"{where} cites docs/{page}: no such page"
    if anchor:
        assert anchor in docs.anchors(dest), f"{where} cites docs/{page}#{anchor}: no such heading"


def test_license_and_changelog() -> None:
    license_text = (docs.ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    assert (docs.ROOT / "CHANGELOG.md").read_text().startswith("# Changelog")



def test_tested_versions_table_is_what_ci_runs() -> None:
    """docs/compatibility.md's versions table is generated from .ci/run and the Makefile."""
    from tests import versions_tested

    page = versions_tested.PAGE.read_text()
    assert page == versions_tested.replaced(page), (
        "docs/compatibility.md's versions table is stale: python -m tests.versions_tested --write")
    rows = dict(versions_tested.rows())
    assert rows["Python 3.12"] == "untested"
