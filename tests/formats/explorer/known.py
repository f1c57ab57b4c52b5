"""The committed known-difference lists, one per reference (known_differences/*.txt), as
protobuf's conformance runner keeps a failure list per implementation.

An entry is a feature tag the generators name (``features()`` of a schema), its reason,
and the shrunk case that shows it::

    union-int-long: being fixed: the union's int/long branch is guessed from the value
      case: {"format": "avro", "schema": {...}, "values": [...]}

A difference in a case with a listed feature is known; any other is new and fails the run.
Every entry's case is checked on every run: one that no longer differs fails the run too
(the fix landed: remove the entry).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.formats.explorer.cases import REFERENCES, Case, Difference
from tests.formats.explorer.values import loads

FOLDER = Path(__file__).parent / "known_differences"


@dataclass
class Entry:
    tag: str
    reason: str
    case: Case | None


def path(fmt: str) -> Path:
    return FOLDER / f"{REFERENCES[fmt]}.txt"


def entries(fmt: str) -> list[Entry]:
    """The entries of ``fmt``'s reference, in file order."""
    found: list[Entry] = []
    file = path(fmt)
    if not file.exists():
        return found
    for number, line in enumerate(file.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.startswith((" ", "\t")):
            text = line.strip()
            if not text.startswith("case:") or not found:
                raise ValueError(f"{file}:{number}: expected '  case: <json>' under an entry")
            data = loads(text[len("case:"):])
            found[-1].case = Case(data["format"], data["schema"], data["values"])
            continue
        tag, sep, reason = line.partition(":")
        if not sep or not reason.strip():
            raise ValueError(f"{file}:{number}: an entry is 'tag: reason'")
        found.append(Entry(tag.strip(), reason.strip(), None))
    return found


def known(difference: Difference, listed: list[Entry]) -> Entry | None:
    """The entry a difference is known by (its case has the entry's feature), or None."""
    for entry in listed:
        if entry.tag in difference.features:
            return entry
    return None
