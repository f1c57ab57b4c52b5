"""A small OpenID Connect identity provider for the OAUTHBEARER tests (loopback HTTP).

It serves what Kafka's own OAUTHBEARER classes talk to (KIP-768):

- ``GET /jwks``: the JSON Web Key Set the broker's ``OAuthBearerValidatorCallbackHandler``
  validates signatures with (``sasl.oauthbearer.jwks.endpoint.url``);
- ``POST /token``: the client-credentials grant (RFC 6749 4.4) a client's
  ``OAuthBearerLoginCallbackHandler`` calls (``sasl.oauthbearer.token.endpoint.url``),
  with the client's id and secret in HTTP Basic auth or the form, answering a real RS256
  JWT (``sub`` = the client id, ``aud``, ``iat``, ``exp``, ``scope``) and ``expires_in``.

Clients are registered with :meth:`OidcServer.add_client`: each has its secret, its token
lifetime (short in the tests, so tokens expire and are refreshed during a query; negative:
the token is expired when issued) and the audience its tokens carry. Every token issued is
counted per client (:attr:`OidcServer.issued`), so a test can tell refreshes happened;
every token request too, answered or not (:attr:`OidcServer.asked`). :meth:`OidcServer.fail`
makes the token endpoint fail on demand (an outage of the identity provider).
Signing uses ``cryptography`` (RSA PKCS#1 v1.5 with SHA-256, as RS256 is defined).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

AUDIENCE = "eoskafka-test-kafka"
ISSUER = "eoskafka-test-idp"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _uint(n: int) -> str:
    return _b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))


@dataclass
class Client:
    secret: str
    lifetime_s: float
    audience: str = AUDIENCE


class OidcServer:
    """JWKS and token endpoints on ``127.0.0.1:<port>``, in a thread; ``with`` starts/stops."""

    def __init__(self) -> None:
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "eoskafka-test-key"
        self.clients: dict[str, Client] = {}
        self.issued: Counter[str] = Counter()
        #: Token requests received, failed ones included.
        self.asked = 0
        #: While set, the HTTP status every token request is answered with (no token).
        self.failing: int | None = None
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    @property
    def token_url(self) -> str:
        return self.url + "/token"

    @property
    def jwks_url(self) -> str:
        return self.url + "/jwks"

    def add_client(self, client_id: str, secret: str, lifetime_s: float,
                   audience: str = AUDIENCE) -> None:
        with self._lock:
            self.clients[client_id] = Client(secret, lifetime_s, audience)

    def fail(self, status: int | None = 503) -> None:
        """Answer every token request with ``status`` from now on (None: serve again)."""
        with self._lock:
            self.failing = status

    def jwks(self) -> dict[str, Any]:
        numbers = self._key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
                          "n": _uint(numbers.n), "e": _uint(numbers.e)}]}

    def sign(self, claims: dict[str, Any]) -> str:
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        signing_input = (_b64(json.dumps(header).encode()) + "."
                         + _b64(json.dumps(claims).encode()))
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return signing_input + "." + _b64(signature)

    def issue(self, client_id: str, scope: str | None = None) -> tuple[str, float]:
        """A token for ``client_id`` and its lifetime in seconds (tests use it directly)."""
        client = self.clients[client_id]
        now = time.time()
        claims = {"sub": client_id, "iss": ISSUER, "aud": client.audience, "iat": int(now),
                  "exp": int(now + client.lifetime_s), "scope": scope or "kafka"}
        with self._lock:
            self.issued[client_id] += 1
        return self.sign(claims), client.lifetime_s

    def __enter__(self) -> OidcServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()


def _handler(server: OidcServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/jwks":
                self._answer(200, server.jwks())
            else:
                self._answer(404, {"error": "not_found"})

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            if self.path != "/token":
                self._answer(404, {"error": "not_found"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            with server._lock:
                server.asked += 1
                failing = server.failing
            if failing is not None:
                self.rfile.read(length)
                self._answer(failing, {"error": "temporarily_unavailable",
                                       "error_description": "the IdP is down (test)"})
                return
            form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
            client_id, secret = form.get("client_id"), form.get("client_secret")
            auth = self.headers.get("Authorization", "")
            if auth.startswith("Basic "):
                pair = base64.b64decode(auth[6:]).decode()
                client_id, _, secret = (urllib.parse.unquote(p) for p in pair.partition(":"))
            if form.get("grant_type") != "client_credentials":
                self._answer(400, {"error": "unsupported_grant_type"})
                return
            client = server.clients.get(client_id or "")
            if client is None or client.secret != secret:
                self._answer(401, {"error": "invalid_client",
                                   "error_description": "client authentication failed"})
                return
            token, lifetime = server.issue(client_id or "", form.get("scope"))
            self._answer(200, {"access_token": token, "token_type": "Bearer",
                               "expires_in": int(lifetime)})

    return Handler
