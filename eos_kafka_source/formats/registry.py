"""A client for Confluent's Schema Registry REST API, with a per-process cache.

It speaks the API Confluent's registry serves and that Apicurio Registry serves at
``/apis/ccompat/v7`` (docs/formats.md lists what differs and what this client
relies on). It implements :class:`~.schemas.SchemaLookup` for the codecs, and the calls
a writer needs: look a schema up under a subject, register it, check compatibility.

Schemas by id, and by subject and numbered version, never change once registered, so they
are cached for the life of the process, keyed by the config (two registries never share
an entry): an executor's Python worker asks the registry once per id. ``"latest"`` is
never cached: it moves when a version is registered.
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Iterable
from typing import Any

from ..errors import ConfigError, SchemaIncompatibleError, SchemaNotFoundError, SchemaRegistryError
from .registry_config import REGISTRY_OPTIONS, RegistryConfig
from .registry_http import Answer, Transport
from .schemas import AVRO, RegisteredSchema, SchemaReference

__all__ = ["REGISTRY_OPTIONS", "RegistryConfig", "SchemaRegistry", "clear_cache",
           "registry_for"]

#: Confluent's error codes for what is not there.
SUBJECT_NOT_FOUND, VERSION_NOT_FOUND, SCHEMA_NOT_FOUND = 40401, 40402, 40403
#: Entries kept per cache before the oldest go (ids are few; this bounds a pathological
#: topic whose every record names another id).
CACHE_LIMIT = 10_000

_lock = threading.Lock()
_by_id: dict[tuple[RegistryConfig, int], RegisteredSchema] = {}
_by_version: dict[tuple[RegistryConfig, str, int], RegisteredSchema] = {}
_by_guid: dict[tuple[RegistryConfig, str], RegisteredSchema] = {}
_clients: dict[RegistryConfig, SchemaRegistry] = {}


def registry_for(config: RegistryConfig) -> SchemaRegistry:
    """This process's client for ``config`` (one per config: it keeps the URL that
    answered last and the loaded TLS context)."""
    with _lock:
        client = _clients.get(config)
        if client is None:
            client = _clients[config] = SchemaRegistry(config)
        return client


def clear_cache() -> None:
    """Forget every cached schema (tests and benchmarks measure an empty cache)."""
    with _lock:
        _by_id.clear()
        _by_version.clear()
        _by_guid.clear()


def stand_in_id(guid: str) -> int:
    """A negative schema id for a GUID whose registry gives no id (registries hand out
    non-negative ids only, so it never names another schema)."""
    return -1 - (int(guid.replace("-", "")[:8], 16) & 0x7FFFFFFF)


def _keep(cache: dict[Any, RegisteredSchema], key: Any, schema: RegisteredSchema) -> None:
    with _lock:
        if len(cache) >= CACHE_LIMIT:
            cache.pop(next(iter(cache)))
        cache[key] = schema


class SchemaRegistry:
    """Confluent's REST API over :class:`~.registry_http.Transport`. Every method raises
    :class:`SchemaRegistryError` for an unreachable registry, a refused sign-in or an
    unexpected answer, naming the URL and the registry's own error."""

    def __init__(self, config: RegistryConfig) -> None:
        self.config = config
        self._transport = Transport(config)

    # -- SchemaLookup ------------------------------------------------------------------

    def by_id(self, schema_id: int) -> RegisteredSchema:
        """The schema with this id (the one in the wire format's header), subject-less:
        one id may be registered under many subjects. Cached."""
        key = (self.config, schema_id)
        cached = _by_id.get(key)
        if cached is not None:
            return cached
        path = f"/schemas/ids/{schema_id}"
        answer = self._call("GET", path)
        if answer.status == 404 and answer.error_code == SCHEMA_NOT_FOUND:
            raise SchemaNotFoundError(
                f"schema id {schema_id} is not in the schema registry at {answer.url} "
                f"({answer.quoted()}): the record was written with a schema this registry "
                f"does not hold. Point schema.registry.url at the registry the producer "
                f"used; `curl {answer.url}/subjects` lists what this one holds.")
        body = self._expect(answer, "GET", path, "schema")
        schema = RegisteredSchema(
            id=schema_id, schema_type=_schema_type(body), text=body["schema"],
            references=_references(body, answer, path))
        _keep(_by_id, key, schema)
        return schema

    def by_guid(self, guid: str) -> RegisteredSchema:
        """The schema a GUID names (a header-framed record's ``__value_schema_id``), by
        Confluent's ``GET /schemas/guids/{guid}``. Its ``id`` is the registry's where the
        answer gives one, else a negative stand-in no registry hands out (the schema is
        kept under it, so the codecs' :meth:`by_id` finds it). Cached."""
        key = (self.config, guid)
        cached = _by_guid.get(key)
        if cached is not None:
            return cached
        path = f"/schemas/guids/{guid}"
        # Not _call: a bare 404 here means a registry without GUIDs, not a wrong URL.
        answer = self._transport.request("GET", path, None)
        if answer.status == 404:
            served = answer.error_code is not None
            raise SchemaNotFoundError(
                f"schema GUID {guid} is not in the schema registry at {answer.url} "
                f"({answer.quoted()}): the record carries its schema as a GUID in a header, "
                + ("which this registry does not hold. Point schema.registry.url at the "
                   "registry the producer used." if served else
                   "and this registry does not resolve GUIDs (Apicurio Registry 3.3.3 does "
                   "not serve /schemas/guids): read with Confluent Schema Registry, or have "
                   "the producer frame the id in the payload (Confluent's serializers' "
                   "default, schema.id.serializer prefix_schema_id_serializer)."))
        body = self._expect(answer, "GET", path, "schema")
        given = body.get("id")
        schema_id = int(given) if isinstance(given, int) else stand_in_id(guid)
        schema = RegisteredSchema(
            id=schema_id, schema_type=_schema_type(body), text=body["schema"],
            references=_references(body, answer, path))
        _keep(_by_guid, key, schema)
        _keep(_by_id, (self.config, schema_id), schema)
        return schema

    def version(self, subject: str, version: int | str) -> RegisteredSchema:
        """``subject``'s schema at ``version`` (a number, or ``"latest"``). Numbered
        versions are cached; ``"latest"`` is asked every time."""
        number = _version_number(version)
        key = (self.config, subject, number) if number is not None else None
        if key is not None and (cached := _by_version.get(key)) is not None:
            return cached
        shown = "latest" if number is None else str(number)
        path = f"/subjects/{_quote(subject)}/versions/{shown}"
        answer = self._call("GET", path)
        self._raise_not_found(answer, subject, shown)
        schema = self._registered(answer, "GET", path)
        if key is not None:
            _keep(_by_version, key, schema)
        return schema

    # -- writing -----------------------------------------------------------------------

    def lookup(self, subject: str, text: str, schema_type: str = AVRO,
               references: Iterable[SchemaReference] = ()) -> RegisteredSchema | None:
        """The version of ``subject`` that holds this schema, or None when the subject
        does not exist or holds no such schema."""
        path = f"/subjects/{_quote(subject)}"
        answer = self._call("POST", path, _request(text, schema_type, references))
        if answer.status == 404 and answer.error_code in (SUBJECT_NOT_FOUND, SCHEMA_NOT_FOUND):
            return None
        return self._registered(answer, "POST", path, schema_type)

    def register(self, subject: str, text: str, schema_type: str = AVRO,
                 references: Iterable[SchemaReference] = ()) -> int:
        """Register the schema under ``subject`` (a no-op answering the existing id when
        it is already there) and return its id. Raises SchemaIncompatibleError when the
        subject's compatibility level refuses it."""
        path = f"/subjects/{_quote(subject)}/versions"
        answer = self._call("POST", path, _request(text, schema_type, references))
        if answer.status == 409:
            reasons = (answer.message,) if answer.message else ()
            raise SchemaIncompatibleError(
                f"the schema registry at {answer.url} refused a new {schema_type} schema "
                f"for subject '{subject}' as incompatible with its earlier versions "
                f"({answer.quoted()}). Make the change compatible under the subject's "
                f"compatibility level (`curl {answer.url}/config/{_quote(subject)}`), or "
                f"write to another subject.", reasons)
        if answer.status == 422:
            raise SchemaRegistryError(
                f"the schema registry at {answer.url} refused the {schema_type} schema for "
                f"subject '{subject}' as invalid ({answer.quoted()}); fix the schema.")
        body = self._expect(answer, "POST", path, "id")
        return int(body["id"])

    def compatible(self, subject: str, text: str, schema_type: str = AVRO,
                   references: Iterable[SchemaReference] = ()) -> tuple[bool, tuple[str, ...]]:
        """Whether ``subject``'s latest version accepts this schema under the subject's
        compatibility level, and the registry's reasons when not (Confluent gives them;
        some registries give none). A subject with no versions accepts anything."""
        path = f"/compatibility/subjects/{_quote(subject)}/versions/latest?verbose=true"
        answer = self._call("POST", path, _request(text, schema_type, references))
        if answer.status == 404 and answer.error_code in (SUBJECT_NOT_FOUND,
                                                          VERSION_NOT_FOUND):
            return True, ()
        body = self._expect(answer, "POST", path, "is_compatible")
        messages = body.get("messages") or ()
        reasons = tuple(m if isinstance(m, str) else str(m) for m in messages)
        return bool(body["is_compatible"]), reasons

    def references(self, schema: RegisteredSchema) -> dict[str, RegisteredSchema]:
        """Every schema ``schema`` refers to, directly or through another, by the name it is
        referred to; a schema comes after those it refers to (the order a Protobuf
        descriptor pool or an Avro parser needs them in)."""
        out: dict[str, RegisteredSchema] = {}
        visiting: set[tuple[str, int]] = set()

        def visit(refs: tuple[SchemaReference, ...]) -> None:
            for ref in refs:
                if ref.name in out or (ref.subject, ref.version) in visiting:
                    continue
                visiting.add((ref.subject, ref.version))
                target = self.version(ref.subject, ref.version)
                visit(target.references)
                out[ref.name] = target

        visit(schema.references)
        return out

    def subjects(self) -> list[str]:
        """Every subject the registry holds."""
        answer = self._call("GET", "/subjects")
        if not answer.ok or not isinstance(answer.body, list):
            raise self._unexpected(answer, "GET", "/subjects")
        return [str(s) for s in answer.body]

    # -- answers -----------------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None) -> Answer:
        answer = self._transport.request(method, path, body)
        if answer.status == 404 and answer.error_code is None:
            raise SchemaRegistryError(
                f"{answer.url} answered {method} {path} with HTTP 404 and no registry error: "
                f"it does not serve Confluent's schema registry API there. Set "
                f"schema.registry.url to the API's base URL (for Apicurio Registry: "
                f"http(s)://host:port/apis/ccompat/v7).")
        return answer

    def _raise_not_found(self, answer: Answer, subject: str, version: str) -> None:
        if answer.status != 404:
            return
        base = answer.url
        if answer.error_code == SUBJECT_NOT_FOUND:
            raise SchemaNotFoundError(
                f"subject '{subject}' is not in the schema registry at {base} "
                f"({answer.quoted()}); `curl {base}/subjects` lists the subjects it holds.")
        if answer.error_code == VERSION_NOT_FOUND:
            raise SchemaNotFoundError(
                f"version {version} of subject '{subject}' is not in the schema registry at "
                f"{base} ({answer.quoted()}); `curl {base}/subjects/{_quote(subject)}/"
                f"versions` lists its versions.")

    def _registered(self, answer: Answer, method: str, path: str,
                    asked_type: str | None = None) -> RegisteredSchema:
        body = self._expect(answer, method, path, "id", "schema", "subject", "version")
        schema = RegisteredSchema(
            id=int(body["id"]),
            # Apicurio leaves schemaType out of a lookup's answer: it is the type asked.
            schema_type=_schema_type(body, asked_type),
            text=body["schema"], subject=str(body["subject"]), version=int(body["version"]),
            references=_references(body, answer, path))
        if (self.config, schema.id) not in _by_id:
            _keep(_by_id, (self.config, schema.id),
                  RegisteredSchema(schema.id, schema.schema_type, schema.text,
                                   references=schema.references))
        return schema

    def _expect(self, answer: Answer, method: str, path: str, *fields: str) -> dict[str, Any]:
        body = answer.body
        if not answer.ok or not isinstance(body, dict) or any(f not in body for f in fields):
            raise self._unexpected(answer, method, path)
        return body

    @staticmethod
    def _unexpected(answer: Answer, method: str, path: str) -> SchemaRegistryError:
        if answer.ok:
            return SchemaRegistryError(
                f"the schema registry at {answer.url} answered {method} {path} with a body "
                f"eoskafka does not understand ({str(answer.body)[:200]!r}); is "
                f"schema.registry.url a Confluent-compatible registry API?")
        return SchemaRegistryError(
            f"the schema registry at {answer.url} refused {method} {path} "
            f"({answer.quoted()}).")


def _request(text: str, schema_type: str,
             references: Iterable[SchemaReference]) -> dict[str, Any]:
    body: dict[str, Any] = {"schema": text}
    if schema_type != AVRO:  # Confluent's registry omits it for Avro, and so do its clients
        body["schemaType"] = schema_type
    refs = [{"name": r.name, "subject": r.subject, "version": r.version} for r in references]
    if refs:
        body["references"] = refs
    return body


def _schema_type(body: dict[str, Any], asked: str | None = None) -> str:
    value = body.get("schemaType")
    return str(value) if value else (asked or AVRO)


def _references(body: dict[str, Any], answer: Answer,
                path: str) -> tuple[SchemaReference, ...]:
    try:
        return tuple(SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
                     for r in body.get("references") or ())
    except (KeyError, TypeError, ValueError):
        raise SchemaRegistryError(
            f"the schema registry at {answer.url} answered {path} with references eoskafka "
            f"cannot read: {body.get('references')!r}.") from None


def _version_number(version: int | str) -> int | None:
    """None for ``"latest"`` (or -1, Confluent's alias for it), else a positive number."""
    if isinstance(version, str):
        if version.strip().lower() == "latest":
            return None
        try:
            version = int(version.strip())
        except ValueError:
            raise ConfigError(
                f"schema version {version!r}: give a number or \"latest\".") from None
    if version == -1:
        return None
    if version < 1:
        raise ConfigError(f"schema version {version}: versions count from 1; give a number "
                          f"or \"latest\".")
    return version


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")
