"""The schema registry client against a real registry (Apicurio Registry's Confluent API).

Sign-ins and TLS go through :class:`RegistryFront`, a small HTTPS front that checks the
``Authorization`` header (and, for mutual TLS, the client certificate) and forwards what it
lets through to the registry: Apicurio's own sign-in needs an OIDC server, and what is
under test is what eoskafka's client sends, not how a registry checks it.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from eos_kafka_source.errors import (
    SchemaIncompatibleError,
    SchemaNotFoundError,
    SchemaRegistryError,
)
from eos_kafka_source.formats.registry import (
    RegistryConfig,
    SchemaRegistry,
    clear_cache,
    registry_for,
)
from eos_kafka_source.formats.schemas import AVRO, JSON, PROTOBUF, SchemaReference
from tests.kafka_security import KEY_PASSWORD, make_certificates
from tests.schema_registry import ApicurioRegistry

USER, PASSWORD, TOKEN = "reader", "pw-7f3KzQ9X-registry", "tok-7f3KzQ9X-bearer"
#: A refusal or an unreachable registry is reported well within this.
FAST_S = 10.0


def _record(name: str, *fields: tuple[str, str] | dict[str, object]) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "eoskafka.test",
                       "fields": [f if isinstance(f, dict) else {"name": f[0], "type": f[1]}
                                  for f in fields]})


def _client(url: str, **options: str) -> SchemaRegistry:
    config = RegistryConfig.parse({"schema.registry.url": url, **options})
    assert config is not None
    return SchemaRegistry(config)


@pytest.fixture
def registry(schema_registry: ApicurioRegistry) -> SchemaRegistry:
    clear_cache()
    return _client(schema_registry.url)


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket process ``pid`` listens on (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                address, port = cols[1].split(":")
                raw = bytes.fromhex(address)
                if table == "tcp":
                    host = socket.inet_ntop(socket.AF_INET, raw[::-1])
                else:
                    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                    host = socket.inet_ntop(socket.AF_INET6, words).removeprefix("::ffff:")
                found.add((host, int(port, 16)))
    return found


def test_the_registry_listens_on_loopback_only(schema_registry: ApicurioRegistry) -> None:
    assert schema_registry.pid is not None
    assert _listening(schema_registry.pid) == {
        ("127.0.0.1", schema_registry.port), ("127.0.0.1", schema_registry.management_port)}


# -- round trips ---------------------------------------------------------------------------


def test_avro_round_trip(registry: SchemaRegistry, unique: str) -> None:
    subject = f"{unique}-value"
    text = _record("Trip", ("id", "long"), ("name", "string"))
    assert registry.lookup(subject, text) is None  # no such subject yet
    schema_id = registry.register(subject, text)
    assert registry.register(subject, text) == schema_id  # idempotent

    by_id = registry.by_id(schema_id)
    assert (by_id.id, by_id.schema_type, by_id.subject, by_id.version) == (
        schema_id, AVRO, None, None)
    assert json.loads(by_id.text) == json.loads(text)
    latest, first = registry.version(subject, "latest"), registry.version(subject, 1)
    assert latest == first
    assert (latest.id, latest.subject, latest.version, latest.schema_type) == (
        schema_id, subject, 1, AVRO)
    found = registry.lookup(subject, text)
    assert found is not None and (found.id, found.subject, found.version) == (
        schema_id, subject, 1)
    # Another schema under the same subject: not found until registered.
    assert registry.lookup(subject, _record("Trip", ("id", "long"))) is None
    assert subject in registry.subjects()


def test_protobuf_round_trip_with_a_reference(registry: SchemaRegistry, unique: str) -> None:
    dep_subject, subject = f"{unique}-dep.proto", f"{unique}-value"
    package = unique.replace("-", "_")
    dep = f'syntax = "proto3";\npackage {package};\nmessage Money {{ int64 cents = 1; }}\n'
    main = (f'syntax = "proto3";\npackage {package};\nimport "money.proto";\n'
            f'message Order {{ string id = 1; Money total = 2; }}\n')
    dep_id = registry.register(dep_subject, dep, PROTOBUF)
    ref = SchemaReference("money.proto", dep_subject, 1)
    schema_id = registry.register(subject, main, PROTOBUF, [ref])
    assert schema_id != dep_id

    by_id = registry.by_id(schema_id)
    assert (by_id.schema_type, by_id.text, by_id.references) == (PROTOBUF, main, (ref,))
    latest = registry.version(subject, "latest")
    assert (latest.id, latest.schema_type, latest.references) == (schema_id, PROTOBUF, (ref,))
    found = registry.lookup(subject, main, PROTOBUF, [ref])
    assert found is not None and (found.id, found.schema_type) == (schema_id, PROTOBUF)
    resolved = registry.references(by_id)
    assert list(resolved) == ["money.proto"]
    assert (resolved["money.proto"].id, resolved["money.proto"].text) == (dep_id, dep)


def test_json_schema_round_trip(registry: SchemaRegistry, unique: str) -> None:
    subject = f"{unique}-value"
    text = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                       "properties": {"id": {"type": "integer"}}, "required": ["id"]})
    schema_id = registry.register(subject, text, JSON)
    by_id = registry.by_id(schema_id)
    assert (by_id.schema_type, json.loads(by_id.text)) == (JSON, json.loads(text))
    assert registry.version(subject, 1).id == schema_id
    found = registry.lookup(subject, text, JSON)
    assert found is not None and (found.id, found.schema_type, found.version) == (
        schema_id, JSON, 1)


def test_one_schema_under_two_subjects_has_one_id(registry: SchemaRegistry,
                                                  unique: str) -> None:
    """The wire format's id names a schema, not a subject's version (Confluent's ids)."""
    text = _record("Shared", ("x", "int"))
    assert registry.register(f"{unique}-a", text) == registry.register(f"{unique}-b", text)


# -- compatibility -------------------------------------------------------------------------


def test_an_incompatible_change_is_refused_with_the_registrys_reasons(
        registry: SchemaRegistry, schema_registry: ApicurioRegistry, unique: str) -> None:
    subject = f"{unique}-value"
    first = _record("Evolving", ("id", "long"))
    assert registry.compatible(subject, first) == (True, ())  # no versions: anything goes
    registry.register(subject, first)
    schema_registry.set_compatibility("BACKWARD", subject)

    added = _record("Evolving", ("id", "long"), {"name": "note", "type": "string",
                                                 "default": ""})
    assert registry.compatible(subject, added)[0] is True
    changed = _record("Evolving", ("id", "string"))
    ok, _reasons = registry.compatible(subject, changed)
    assert ok is False
    with pytest.raises(SchemaIncompatibleError) as refused:
        registry.register(subject, changed)
    assert refused.value.reasons and all(r in str(refused.value) for r in refused.value.reasons)
    assert subject in str(refused.value) and schema_registry.url in str(refused.value)
    assert registry.version(subject, "latest").version == 1  # nothing registered


# -- what is not there ---------------------------------------------------------------------


def test_an_unknown_id_names_the_id(registry: SchemaRegistry,
                                    schema_registry: ApicurioRegistry) -> None:
    with pytest.raises(SchemaNotFoundError) as missing:
        registry.by_id(2_000_000_001)
    text = str(missing.value)
    assert "schema id 2000000001" in text and schema_registry.url in text
    assert "EOSKAFKA_SCHEMA_NOT_FOUND" in text and "40403" in text


def test_an_unknown_subject_or_version_says_how_to_list(registry: SchemaRegistry,
                                                        unique: str) -> None:
    with pytest.raises(SchemaNotFoundError, match=rf"subject '{unique}-nope'.*/subjects`"):
        registry.version(f"{unique}-nope", "latest")
    registry.register(f"{unique}-value", _record("V", ("a", "int")))
    with pytest.raises(SchemaNotFoundError, match=rf"version 7 of subject '{unique}-value'"):
        registry.version(f"{unique}-value", 7)


def test_a_url_that_is_not_the_api_says_so(schema_registry: ApicurioRegistry) -> None:
    root = schema_registry.url.removesuffix("/apis/ccompat/v7")
    with pytest.raises(SchemaRegistryError, match="/apis/ccompat/v7"):
        _client(root).by_id(1)


# -- reaching it ---------------------------------------------------------------------------


def test_an_unreachable_registry_fails_quickly() -> None:
    dead = _dead_url()
    started = time.monotonic()
    with pytest.raises(SchemaRegistryError) as failed:
        _client(dead, **{"schema.registry.max.retries": "2",
                         "schema.registry.retries.wait.ms": "50"}).by_id(1)
    assert time.monotonic() - started < FAST_S
    text = str(failed.value)
    assert dead in text and "connection refused" in text and "3 rounds" in text
    assert "schema.registry.url" in text


def test_a_registry_that_never_answers_fails_within_the_timeout() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(SchemaRegistryError, match="no answer within 300 ms"):
            _client(url, **{"schema.registry.request.timeout.ms": "300",
                            "schema.registry.max.retries": "1",
                            "schema.registry.retries.wait.ms": "10"}).by_id(1)
        assert time.monotonic() - started < FAST_S


def test_the_next_url_is_used_when_the_first_is_down(schema_registry: ApicurioRegistry,
                                                     unique: str) -> None:
    clear_cache()
    client = _client(f"{_dead_url()},{schema_registry.url}",
                     **{"schema.registry.max.retries": "0"})
    schema_id = client.register(f"{unique}-value", _record("Failover", ("a", "int")))
    assert client.by_id(schema_id).id == schema_id


# -- sign-ins and TLS through a front ------------------------------------------------------


class RegistryFront:
    """HTTPS on 127.0.0.1 in front of the registry: answers 401 (as Confluent's registry
    does) unless the Authorization header is ``expected``, else forwards the request and
    relays the answer; records every request's path and headers."""

    def __init__(self, upstream: str, tls: ssl.SSLContext, expected: str | None) -> None:
        self.upstream, self.expected = upstream, expected
        self.seen: list[tuple[str, Mapping[str, str]]] = []
        front = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def _relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                front.seen.append((self.path, dict(self.headers)))
                if front.expected is not None and \
                        self.headers.get("Authorization") != front.expected:
                    self._answer(401, json.dumps({"error_code": 401,
                                                  "message": "Unauthorized"}).encode())
                    return
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("content-type", "accept")}
                req = urllib.request.Request(front.upstream + self.path, data=body or None,
                                             method=self.command, headers=headers)
                try:
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        self._answer(resp.status, resp.read())
                except urllib.error.HTTPError as err:
                    self._answer(err.code, err.read())

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = _relay  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def paths(self) -> list[str]:
        return [p for p, _ in self.seen]

    def url(self, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}/apis/ccompat/v7"

    def __enter__(self) -> RegistryFront:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certificates(tmp_path_factory.mktemp("registry-certs"))


def _server_tls(certs: Mapping[str, Path], *, client_certs: bool = False) -> ssl.SSLContext:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(certs["server_cert"], certs["server_key"])
    if client_certs:
        tls.verify_mode = ssl.CERT_REQUIRED
        tls.load_verify_locations(certs["ca"])
    return tls


@pytest.fixture
def front(schema_registry: ApicurioRegistry, certs: dict[str, Path],
          request: pytest.FixtureRequest) -> Iterator[RegistryFront]:
    expected, client_certs = getattr(request, "param", (None, False))
    upstream = schema_registry.url.removesuffix("/apis/ccompat/v7")
    with RegistryFront(upstream, _server_tls(certs, client_certs=client_certs),
                       expected) as f:
        yield f


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize("front", [(_basic(USER, PASSWORD), False)], indirect=True)
def test_basic_sign_in_over_tls(front: RegistryFront, certs: dict[str, Path],
                                schema_registry: ApicurioRegistry, unique: str) -> None:
    tls = {"schema.registry.ssl.ca.location": str(certs["ca"])}
    client = _client(front.url(), **{"schema.registry.basic.auth.user.info":
                                     f"{USER}:{PASSWORD}", **tls})
    schema_id = client.register(f"{unique}-value", _record("Signed", ("a", "int")))
    assert client.by_id(schema_id).id == schema_id
    assert {h.get("Authorization") for _, h in front.seen} == {_basic(USER, PASSWORD)}

    wrong = _client(front.url(), **{"schema.registry.basic.auth.user.info":
                                    f"{USER}:wrong-{PASSWORD}", **tls})
    with pytest.raises(SchemaRegistryError) as refused:
        wrong.by_id(schema_id + 1)
    text = str(refused.value)
    assert "HTTP 401" in text and "fix schema.registry.basic.auth.user.info" in text
    assert front.url() in text and PASSWORD not in text

    with pytest.raises(SchemaRegistryError, match="no credentials were sent"):
        _client(front.url(), **tls).by_id(schema_id + 1)


@pytest.mark.parametrize("front", [(f"Bearer {TOKEN}", False)], indirect=True)
def test_bearer_sign_in(front: RegistryFront, certs: dict[str, Path], unique: str) -> None:
    tls = {"schema.registry.ssl.ca.location": str(certs["ca"])}
    client = _client(front.url(), **{"schema.registry.bearer.auth.token": TOKEN, **tls})
    schema_id = client.register(f"{unique}-value", _record("Bearer", ("a", "int")))
    assert client.version(f"{unique}-value", "latest").id == schema_id
    assert {h.get("Authorization") for _, h in front.seen} == {f"Bearer {TOKEN}"}

    wrong = _client(front.url(), **{"schema.registry.bearer.auth.token": "expired", **tls})
    with pytest.raises(SchemaRegistryError, match="fix schema.registry.bearer.auth.token") as e:
        wrong.version(f"{unique}-value", "latest")
    assert "expired" not in str(e.value)


def test_tls_verifies_the_registrys_certificate(front: RegistryFront,
                                                certs: dict[str, Path]) -> None:
    for options in ({}, {"schema.registry.ssl.ca.location": str(certs["other_ca"])}):
        with pytest.raises(SchemaRegistryError, match="failed TLS verification.*ca.location"):
            _client(front.url(), **options).by_id(1)
    # The certificate names 127.0.0.1: another name for the same host is refused.
    with pytest.raises(SchemaRegistryError, match="failed TLS verification"):
        _client(front.url("localhost"),
                **{"schema.registry.ssl.ca.location": str(certs["ca"])}).by_id(1)
    assert front.seen == []  # no request went out unverified


@pytest.mark.parametrize("front", [(None, True)], indirect=True)
def test_mutual_tls(front: RegistryFront, certs: dict[str, Path], unique: str) -> None:
    tls = {"schema.registry.ssl.ca.location": str(certs["ca"])}
    client = _client(front.url(), **tls, **{
        "schema.registry.ssl.certificate.location": str(certs["client_cert"]),
        "schema.registry.ssl.key.location": str(certs["client_key"]),
        "schema.registry.ssl.key.password": KEY_PASSWORD})
    schema_id = client.register(f"{unique}-value", _record("Mutual", ("a", "int")))
    assert client.by_id(schema_id).id == schema_id
    with pytest.raises(SchemaRegistryError, match="TLS failed.*set schema.registry.ssl."
                       "certificate.location"):  # no client certificate: the front hangs up
        _client(front.url(), **tls, **{"schema.registry.max.retries": "0"}).by_id(schema_id)


# -- the per-process cache -----------------------------------------------------------------


def test_ids_and_numbered_versions_are_asked_once_latest_every_time(
        front: RegistryFront, certs: dict[str, Path], unique: str) -> None:
    clear_cache()
    config = RegistryConfig.parse({"schema.registry.url": front.url(),
                                   "schema.registry.ssl.ca.location": str(certs["ca"])})
    assert config is not None
    subject = f"{unique}-value"
    schema_id = registry_for(config).register(subject, _record("Cached", ("a", "int")))
    front.seen.clear()
    for _ in range(3):  # a new client each time, as each task builds one: one cache
        client = SchemaRegistry(config)
        client.by_id(schema_id)
        client.version(subject, 1)
        client.version(subject, "latest")
    base = "/apis/ccompat/v7"
    assert Counter(front.paths) == {f"{base}/schemas/ids/{schema_id}": 1,
                                    f"{base}/subjects/{subject}/versions/1": 1,
                                    f"{base}/subjects/{subject}/versions/latest": 3}
