"""A TLS and SASL front door for a plain embedded broker, for the security tests.

Tansu 0.6.0 cannot authenticate anyone (its memory/S3 storage keeps no SCRAM
credentials, PLAIN is not compiled in) and cannot serve TLS (``--cert`` and
``--key`` are refused together, and its TLS acceptor is never used):
``tests/broker/test_security.py`` pins both facts. To test eoskafka's client
side all the same, this front sits between the clients and a plain Tansu whose
advertised listener is the front's address, so every connection a client opens,
including those to brokers it learns from metadata or FindCoordinator, comes here:

- TLS is terminated with Python's ``ssl`` module (a certificate made with the
  ``openssl`` CLI by :func:`make_certificates`);
- SASL is the broker's side of Kafka's protocol (SaslHandshake v0-1,
  SaslAuthenticate v0-2) for PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802,
  checked against salted keys like Kafka's broker), answering bad credentials as
  Kafka does: error 58 SASL_AUTHENTICATION_FAILED, then closing the connection;
  any other request before authentication closes the connection;
- after authentication, bytes are relayed both ways unchanged, and the API key
  of every request is recorded per connection (:attr:`SecureFront.requests`),
  so a test can assert which requests went through the secured door.

Threads only, no sleeps; stop() closes everything.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import selectors
import socket
import ssl
import struct
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from eos_kafka_source.broker import EmbeddedBroker
from tests.kafka_security import jaas, make_certificates  # noqa: F401 (re-exported)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
#: Kafka API keys by name, for assertions on :attr:`SecureFront.requests`.
API_KEYS = {
    "Produce": 0, "Fetch": 1, "ListOffsets": 2, "Metadata": 3, "OffsetCommit": 8,
    "OffsetFetch": 9, "FindCoordinator": 10, "SaslHandshake": 17, "ApiVersions": 18,
    "CreateTopics": 19, "InitProducerId": 22, "AddPartitionsToTxn": 24, "EndTxn": 26,
    "TxnOffsetCommit": 28, "SaslAuthenticate": 36,
}
SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@dataclass
class Connection:
    """One client connection through the front."""

    tls: bool
    user: str | None = None
    mechanism: str | None = None
    api_keys: list[int] = field(default_factory=list)


class SecureFront:
    """Listens on ``127.0.0.1:port``; relays authenticated traffic to ``upstream``.

    ``users`` maps user name to password (an empty mapping: no SASL, TLS only);
    ``mechanisms`` are those offered in SaslHandshake.
    """

    def __init__(
        self,
        upstream: tuple[str, int] | None = None,
        *,
        port: int = 0,
        tls: ssl.SSLContext | None = None,
        users: Mapping[str, str] | None = None,
        mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
    ) -> None:
        self.upstream, self.tls = upstream, tls
        self.users = dict(users or {})
        self.mechanisms = mechanisms
        self.connections: list[Connection] = []
        self.refused: list[str] = []
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._server = socket.create_server(("127.0.0.1", port))
        self.port: int = self._server.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name="secure-front", daemon=True)
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> SecureFront:
        assert self.upstream is not None, "set the upstream broker first"
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closed = True
        _close(self._server)
        with self._lock:
            for sock in self._sockets:
                _close(sock)
        if self._thread.is_alive():
            self._thread.join(timeout=5)
            if self._thread.is_alive():
                raise RuntimeError("secure front: the accept thread did not stop within 5 s")

    def reset(self) -> None:
        with self._lock:
            self.connections.clear()
            self.refused.clear()

    @property
    def requests(self) -> set[int]:
        """API keys of every request relayed (after authentication) since the last reset."""
        with self._lock:
            return {k for c in self.connections for k in c.api_keys}

    # -- connections -------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                sock, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _serve(self, raw: socket.socket) -> None:
        self._track(raw)
        conn = Connection(tls=self.tls is not None)
        client, upstream = raw, None
        try:
            if self.tls is not None:
                try:
                    client = self.tls.wrap_socket(raw, server_side=True)
                except (ssl.SSLError, OSError) as exc:
                    self._refuse(f"TLS handshake: {exc}")
                    return
                self._track(client)
            assert self.upstream is not None
            upstream = socket.create_connection(self.upstream)
            self._track(upstream)
            if self.users and not self._authenticate(client, upstream, conn):
                return
            with self._lock:
                self.connections.append(conn)
            self._relay(client, upstream, conn)
        except OSError:
            pass
        finally:
            for sock in (client, upstream, raw):
                if sock is not None:
                    _close(sock)

    def _relay(self, client: socket.socket, upstream: socket.socket, conn: Connection) -> None:
        """Copy bytes both ways in one thread (an SSL socket must not be read and written
        from two threads at once), noting the API key of each client request."""
        pending = bytearray()
        with selectors.DefaultSelector() as sel:
            sel.register(client, selectors.EVENT_READ)
            sel.register(upstream, selectors.EVENT_READ)
            while not self._closed:
                for key, _ in sel.select():
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    data = sock.recv(1 << 16)
                    while isinstance(sock, ssl.SSLSocket) and sock.pending():
                        data += sock.recv(sock.pending())
                    if not data:
                        return
                    if sock is upstream:
                        client.sendall(data)
                        continue
                    upstream.sendall(data)
                    pending += data
                    while len(pending) >= 6:
                        (size,) = struct.unpack_from(">i", pending, 0)
                        if len(pending) < 4 + size:
                            break
                        with self._lock:
                            conn.api_keys.append(struct.unpack_from(">h", pending, 4)[0])
                        del pending[:4 + size]

    def _refuse(self, why: str) -> None:
        with self._lock:
            self.refused.append(why)

    def _authenticate(self, client: socket.socket, upstream: socket.socket,
                      conn: Connection) -> bool:
        """Serve requests until SASL succeeds (True) or the connection is refused (False)."""
        mechanism: str | None = None
        scram: _ScramServer | None = None
        while True:
            frame = _read_frame(client)
            if frame is None:
                return False
            key, version, correlation = struct.unpack_from(">hhi", frame, 4)
            if key == API_VERSIONS:  # the broker's own answer: versions are the broker's
                upstream.sendall(frame)
                reply = _read_frame(upstream)
                if reply is None:
                    return False
                client.sendall(reply)
                continue
            body, flexible = _request_body(frame, key, version)
            if key == SASL_HANDSHAKE:
                (n,) = struct.unpack_from(">h", body, 0)
                asked = body[2:2 + n].decode()
                error = 0 if asked in self.mechanisms else UNSUPPORTED_SASL_MECHANISM
                mechanism = asked if error == 0 else None
                payload = struct.pack(">hi", error, len(self.mechanisms)) + b"".join(
                    struct.pack(">h", len(m)) + m.encode() for m in self.mechanisms)
                client.sendall(_frame(struct.pack(">i", correlation) + payload))
                if error:
                    self._refuse(f"mechanism {asked}")
                    return False
                continue
            if key != SASL_AUTHENTICATE or mechanism is None:
                self._refuse(f"api key {key} before authentication")
                return False
            token = _auth_bytes(body, flexible)
            if mechanism == "PLAIN":
                parts = token.split(b"\0")
                user = parts[1].decode() if len(parts) == 3 else ""
                ok = len(parts) == 3 and self._password_ok(user, parts[2].decode())
                answer, done = b"", True
            else:
                if scram is None:
                    scram = _ScramServer(mechanism, self.users)
                answer, done, ok = scram.step(token)
                user = scram.user
            if not ok:
                client.sendall(_auth_response(correlation, version, SASL_AUTHENTICATION_FAILED,
                                              _failure_message(mechanism), b""))
                self._refuse(f"{mechanism} credentials of {user!r}")
                _await_close(client)  # as Kafka: the client reads the error, then closes
                return False
            client.sendall(_auth_response(correlation, version, 0, None, answer))
            if done:
                conn.user, conn.mechanism = user, mechanism
                return True

    def _password_ok(self, user: str, password: str) -> bool:
        expected = self.users.get(user)
        return expected is not None and hmac.compare_digest(expected.encode(), password.encode())


def sasl_options(bootstrap: str, mechanism: str, user: str, password: str, *,
                 ca: Path | None = None, **more: str) -> dict[str, str]:
    """``kafka.*`` options as a Spark job would write them (Java client names): SASL_SSL
    with a PEM truststore when ``ca`` is given, else SASL_PLAINTEXT."""
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "kafka.security.protocol": "SASL_SSL" if ca else "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": mechanism,
        "kafka.sasl.jaas.config": jaas(mechanism, user, password),
        "kafka.socket.connection.setup.timeout.ms": "8000",
    }
    if ca:
        options["kafka.ssl.truststore.location"] = str(ca)
        options["kafka.ssl.truststore.type"] = "PEM"
    options.update(more)
    return options


@contextmanager
def secured_broker(
    *, certs: Mapping[str, Path] | None = None, users: Mapping[str, str] | None = None,
    client_certs: bool = False,
) -> Iterator[SecureFront]:
    """A plain embedded broker behind a :class:`SecureFront` (TLS with ``certs``' server
    certificate, requiring a client certificate signed by ``certs["ca"]`` if
    ``client_certs``; SASL with ``users``); the broker advertises the front, so clients
    that bootstrap from ``front.bootstrap_servers`` never reach the broker any other way."""
    tls = None
    if certs is not None:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(certs["server_cert"], certs["server_key"])
        if client_certs:
            tls.verify_mode = ssl.CERT_REQUIRED
            tls.load_verify_locations(certs["ca"])
    front = SecureFront(tls=tls, users=users)
    try:
        with EmbeddedBroker(advertised_port=front.port) as broker:
            front.upstream = ("127.0.0.1", broker.port)
            front.start()
            yield front
    finally:
        front.stop()


def _failure_message(mechanism: str) -> str:
    if mechanism == "PLAIN":  # Kafka's PlainServerCallbackHandler wording
        return "Authentication failed: Invalid username or password"
    return ("Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {mechanism}")


class _ScramServer:
    """The broker side of SCRAM-SHA-256/512 (RFC 5802), as Kafka's ScramSaslServer."""

    def __init__(self, mechanism: str, users: Mapping[str, str]) -> None:
        self.hash = _HASHES[mechanism]
        self.users = users
        self.user = ""
        self.iterations = 4096
        self.salt = secrets.token_bytes(16)
        self.first_bare = self.server_first = self.nonce = ""

    def _h(self, data: bytes) -> bytes:
        return hashlib.new(self.hash, data).digest()

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash).digest()

    def step(self, token: bytes) -> tuple[bytes, bool, bool]:
        """(answer, done, ok) for one client message."""
        text = token.decode()
        if not self.first_bare:  # client-first: gs2 header, then n=user,r=nonce
            self.first_bare = text.split(",", 2)[2]
            attrs = dict(a.split("=", 1) for a in self.first_bare.split(","))
            self.user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
            self.nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
            self.server_first = (f"r={self.nonce},s={base64.b64encode(self.salt).decode()},"
                                 f"i={self.iterations}")
            return self.server_first.encode(), False, True
        without_proof, _, proof = text.rpartition(",p=")
        attrs = dict(a.split("=", 1) for a in without_proof.split(","))
        password = self.users.get(self.user)
        if password is None or attrs.get("r") != self.nonce:
            return b"", True, False
        salted = hashlib.pbkdf2_hmac(self.hash, password.encode(), self.salt, self.iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = self._h(client_key)
        auth_message = f"{self.first_bare},{self.server_first},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        given = base64.b64decode(proof)
        recovered = bytes(a ^ b for a, b in zip(given, signature, strict=False))
        if len(given) != len(signature) or not hmac.compare_digest(self._h(recovered),
                                                                   stored_key):
            return b"", True, False
        server_sig = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return b"v=" + base64.b64encode(server_sig), True, True


# -- Kafka framing ------------------------------------------------------------------------------


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed Kafka frame, prefix included; None at end of stream."""
    head = _read_exact(sock, 4)
    if head is None:
        return None
    body = _read_exact(sock, struct.unpack(">i", head)[0])
    return None if body is None else head + body


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _put_uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _request_body(frame: bytes, key: int, version: int) -> tuple[bytes, bool]:
    """The request body after the header (v1, or v2 for flexible versions) and whether it
    is flexible. SaslAuthenticate is flexible from v2; SaslHandshake never."""
    (client_len,) = struct.unpack_from(">h", frame, 12)
    pos = 14 + max(client_len, 0)
    flexible = key == SASL_AUTHENTICATE and version >= 2
    if flexible:
        tags, pos = _uvarint(frame, pos)
        for _ in range(tags):
            _, pos = _uvarint(frame, pos)
            size, pos = _uvarint(frame, pos)
            pos += size
    return frame[pos:], flexible


def _auth_bytes(body: bytes, flexible: bool) -> bytes:
    if flexible:
        n, pos = _uvarint(body, 0)
        return body[pos:pos + n - 1]
    (n,) = struct.unpack_from(">i", body, 0)
    return body[4:4 + n]


def _auth_response(correlation: int, version: int, error: int, message: str | None,
                   auth: bytes) -> bytes:
    if version >= 2:
        text = b"\x00" if message is None else _put_uvarint(len(message) + 1) + message.encode()
        payload = (struct.pack(">i", correlation) + b"\x00" + struct.pack(">h", error) + text
                   + _put_uvarint(len(auth) + 1) + auth + struct.pack(">q", 0) + b"\x00")
    else:
        text = struct.pack(">h", -1) if message is None else (
            struct.pack(">h", len(message)) + message.encode())
        payload = (struct.pack(">ih", correlation, error) + text + struct.pack(">i", len(auth))
                   + auth + (struct.pack(">q", 0) if version >= 1 else b""))
    return _frame(payload)


def _await_close(sock: socket.socket, timeout_s: float = 5.0) -> None:
    """Wait until the peer closes its side (or ``timeout_s`` passes)."""
    sock.settimeout(timeout_s)
    try:
        while sock.recv(4096):
            pass
    except OSError:
        pass


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
