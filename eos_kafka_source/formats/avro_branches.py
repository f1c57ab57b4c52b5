"""Which branch of a union the writer took, for unions Spark shows as ``struct<member0, ...>``.

fastavro returns a plain Python value for a primitive union branch, so an ``int`` and a
``long`` branch (or ``float`` and ``double``, ``string`` read as ``bytes``) cannot be told
apart from the value. spark-avro fills the member of the reader branch Avro's resolution
chose (``GenericData.resolveUnion`` on the Java datum). So before fastavro parses them,
every primitive branch of such a union is wrapped in a one-field record: a record's
encoding is its fields' back to back, so the bytes read are the same, and the value comes
back as ``{MARK + k: value}`` naming the member ``k``.

The reader's wrappers are the same for every writer (:func:`reader_documents`). A writer
schema is walked beside the reader (:func:`writer_documents`): each primitive writer branch
(or a plain primitive where the reader has the union) is wrapped in a record whose name
the reader's wrapper for the branch Java's resolver picks (``bestBranch``: the same type
first, then the first promotion) lists among its aliases, so fastavro resolves to it.
"""

from __future__ import annotations

import copy
from typing import Any

from .avro_types import NAMED, PRIMITIVES, Node, _avro_type, _full_name, _lookup_name, _register

#: The field name of a wrapper record: no Avro name can start with it, and with the member.
MARK = "\x00eoskafka-member-"
_SPACE = "eoskafka.branch"
_WRAPPED = ("boolean", "int", "long", "float", "double", "bytes", "string")
_PROMOTIONS = {"int": ("long", "double", "float"), "long": ("double", "float"),
               "float": ("double",), "string": ("bytes",), "bytes": ("string",)}

Names = dict[str, tuple[Any, str]]


class WriterConflictError(ValueError):
    """A writer's named type stands for two reader types whose unions differ."""


def needed(root: Node) -> bool:
    """Whether the reader has a union-as-struct with a primitive branch."""
    return any(n.kind == "union" and any(set(b) & set(_WRAPPED) for b in n.branches)
               for n in root.walk())


def member(value: Any) -> tuple[int, Any] | None:
    """(member, value) of a wrapped branch's value, or None for any other value."""
    if type(value) is dict and len(value) == 1:
        ((key, inner),) = value.items()
        if isinstance(key, str) and key.startswith(MARK):
            return int(key[len(MARK):]), inner
    return None


def _names(docs: list[Any]) -> Names:
    names: Names = {}
    for doc in docs:
        _register(doc, "", names)
    return names


def _is_struct_union(branches: list[Any], space: str, names: Names) -> bool:
    """As avro_types' union: two or more non-null branches, not just int/long or float/double."""
    types = {_avro_type(b, space, names) for b in branches} - {"null"}
    rest = [b for b in branches if _avro_type(b, space, names) != "null"]
    return len(rest) >= 2 and types not in ({"int", "long"}, {"float", "double"})


def _wrapper(name: str, k: int, inner: Any, aliases: list[str] | None = None) -> dict[str, Any]:
    made: dict[str, Any] = {"type": "record", "name": name, "namespace": _SPACE}
    if aliases:
        made["aliases"] = aliases
    made["fields"] = [{"name": f"{MARK}{k}", "type": inner}]
    return made


def _named(s: Any, space: str) -> str | None:
    """The full name of a named type's definition, else None."""
    if isinstance(s, dict) and s.get("type") in NAMED:
        return _full_name(s["name"], s.get("namespace"), space)
    return None


def _reader_name(k: int, rt: str) -> str:
    return f"b{k}_{rt}"


def _writer_name(k: int, rt: str, wt: str) -> str:
    return f"w{k}_{rt}_{wt}"


def _wrap_reader(s: Any, space: str, names: Names) -> Any:
    if isinstance(s, list):
        if not _is_struct_union(s, space, names):
            return [_wrap_reader(b, space, names) for b in s]
        out, k = [], 0
        for b in s:
            t = _avro_type(b, space, names)
            if t == "null":
                out.append(b)
                continue
            if t in _WRAPPED:
                out.append(_wrapper(_reader_name(k, t), k, b,
                                    [_writer_name(k, t, wt) for wt in _WRAPPED]))
            else:
                out.append(_wrap_reader(b, space, names))
            k += 1
        return out
    if not isinstance(s, dict):
        return s
    kind = s.get("type")
    if isinstance(kind, (dict, list)):
        return {**s, "type": _wrap_reader(kind, space, names)}
    if kind in ("record", "error"):
        inner = _full_name(s["name"], s.get("namespace"), space).rpartition(".")[0]
        return {**s, "fields": [{**f, "type": _wrap_reader(f["type"], inner, names)}
                                for f in s.get("fields", [])]}
    if kind == "array":
        return {**s, "items": _wrap_reader(s["items"], space, names)}
    if kind == "map":
        return {**s, "values": _wrap_reader(s["values"], space, names)}
    return s


def reader_documents(docs: list[Any]) -> list[Any]:
    """The reader's documents with the branches of its unions-as-struct wrapped."""
    names = _names(docs)
    return _dedupe([_wrap_reader(doc, "", names) for doc in docs])


def _best(reader_types: list[str], wt: str) -> int:
    """Java's ``bestBranch`` for a primitive: the same type first, then a promotion."""
    if wt in reader_types:
        return reader_types.index(wt)
    for k, rt in enumerate(reader_types):
        if rt in _PROMOTIONS.get(wt, ()):
            return k
    return -1


class _Walk:
    """A writer schema walked beside the reader's, wrapping the writer's branches."""

    def __init__(self, wnames: Names, rnames: Names) -> None:
        self.wnames, self.rnames = wnames, rnames
        self.seen: dict[str, str] = {}

    def _deref(self, s: Any, space: str, names: Names) -> tuple[Any, str]:
        """(definition, its namespace): a named reference looked up, ``{"type": ...}``
        unwrapped."""
        while isinstance(s, dict) and isinstance(s.get("type"), (dict, list)):
            s = s["type"]
        if isinstance(s, str) and s not in PRIMITIVES:
            found = _lookup_name(s, space, names)
            if found is not None:
                return found
        return s, space

    def _matching(self, w: Any, wsp: str, branches: list[Any], rsp: str) -> Any | None:
        """The reader branch a non-primitive writer type resolves to (None: no match)."""
        wdef, wspace = self._deref(w, wsp, self.wnames)
        wt = _avro_type(wdef, wspace, self.wnames)
        same = [b for b in branches if _avro_type(b, rsp, self.rnames) == wt]
        if wt not in NAMED:
            return same[0] if same else None
        wfull = _full_name(wdef["name"], wdef.get("namespace"), wspace)
        short = wfull.rpartition(".")[2]
        defs = [(b, self._deref(b, rsp, self.rnames)[0]) for b in same]
        for pick in (
            lambda d: _full_name(d["name"], d.get("namespace"), rsp) == wfull,
            lambda d: d["name"].rpartition(".")[2] == short or wfull in d.get("aliases", [])
            or short in d.get("aliases", []),
            lambda d: wt in ("record", "error"),
        ):
            for b, d in defs:
                if isinstance(d, dict) and pick(d):
                    return b
        return None

    def walk(self, w: Any, r: Any, wsp: str, rsp: str) -> Any:
        """``w`` with its branches wrapped for the reader ``r`` (definitions in place)."""
        if isinstance(w, dict) and isinstance(w.get("type"), (dict, list)):
            w["type"] = self.walk(w["type"], r, wsp, rsp)
            return w
        rdef, rspace = self._deref(r, rsp, self.rnames)
        if isinstance(rdef, list):
            return self._to_union(w, rdef, wsp, rspace)
        if isinstance(w, list):
            for i, b in enumerate(w):
                w[i] = self.walk(b, rdef, wsp, rspace)
            return w
        wdef, wspace = self._deref(w, wsp, self.wnames)
        wfull = _named(wdef, wspace)
        if wfull is not None:
            rfull = _named(rdef, rspace)
            if wfull in self.seen:
                if self.seen[wfull] != rfull:
                    raise WriterConflictError(
                        f"the writer's {wfull} stands for both {self.seen[wfull]} and {rfull}")
                return w
            self.seen[wfull] = rfull or ""
        if not isinstance(wdef, dict) or not isinstance(rdef, dict):
            return w
        kind = wdef.get("type")
        if kind in ("record", "error") and rdef.get("type") in ("record", "error"):
            winner = _full_name(wdef["name"], wdef.get("namespace"), wspace).rpartition(".")[0]
            rinner = _full_name(rdef["name"], rdef.get("namespace"), rspace).rpartition(".")[0]
            wfields = {f["name"]: f for f in wdef.get("fields", [])}
            for rf in rdef.get("fields", []):
                for name in (rf["name"], *rf.get("aliases", [])):
                    if name in wfields:
                        wf = wfields[name]
                        wf["type"] = self.walk(wf["type"], rf["type"], winner, rinner)
                        break
        elif kind == "array" and rdef.get("type") == "array":
            wdef["items"] = self.walk(wdef["items"], rdef["items"], wspace, rspace)
        elif kind == "map" and rdef.get("type") == "map":
            wdef["values"] = self.walk(wdef["values"], rdef["values"], wspace, rspace)
        return w

    def _to_union(self, w: Any, branches: list[Any], wsp: str, rsp: str) -> Any:
        rest = [b for b in branches if _avro_type(b, rsp, self.rnames) != "null"]
        if isinstance(w, list):
            for i, b in enumerate(w):
                w[i] = self._to_union(b, branches, wsp, rsp)
            return w
        wt = _avro_type(w, wsp, self.wnames)
        if wt == "null":
            return w
        if not _is_struct_union(branches, rsp, self.rnames):
            return self.walk(w, rest[0], wsp, rsp) if len(rest) == 1 else w
        if wt in _WRAPPED:
            rtypes = [_avro_type(b, rsp, self.rnames) for b in rest]
            k = _best(rtypes, wt)
            if k < 0:
                return w  # no branch takes it: fastavro's resolution error names it
            return _wrapper(_writer_name(k, rtypes[k], wt), k, w)
        match = self._matching(w, wsp, rest, rsp)
        return w if match is None else self.walk(w, match, wsp, rsp)


def writer_documents(writer_docs: list[Any], reader_docs: list[Any]) -> list[Any]:
    """The writer's documents wrapped to resolve to :func:`reader_documents` of the
    reader's; raises WriterConflictError where one writer type would need two wrappings."""
    docs = copy.deepcopy(writer_docs)
    walk = _Walk(_names(docs), _names(reader_docs))
    docs[-1] = walk.walk(docs[-1], reader_docs[-1], "", "")
    return _dedupe(docs)


def _dedupe(docs: list[Any]) -> list[Any]:
    """Each wrapper defined once, at its first place in parsing order; later ones named."""
    defined: set[str] = set()

    def visit(s: Any) -> Any:
        if isinstance(s, list):
            return [visit(b) for b in s]
        if not isinstance(s, dict):
            return s
        if s.get("namespace") == _SPACE and s.get("type") == "record":
            full = f"{_SPACE}.{s['name']}"
            if full in defined:
                return full
            defined.add(full)
            return s
        kind = s.get("type")
        if isinstance(kind, (dict, list)):
            return {**s, "type": visit(kind)}
        if kind in ("record", "error"):
            return {**s, "fields": [{**f, "type": visit(f["type"])} for f in s["fields"]]}
        if kind == "array":
            return {**s, "items": visit(s["items"])}
        if kind == "map":
            return {**s, "values": visit(s["values"])}
        return s

    return [visit(doc) for doc in docs]
