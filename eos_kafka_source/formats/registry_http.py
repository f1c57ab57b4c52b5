"""One request to a schema registry: failover over its URLs, retries, sign-in, TLS.

Standard library only (urllib and ssl), so the executors need nothing beyond eoskafka.
Connection failures and the answers a registry gives while it is overloaded or restarting
(408, 429, 5xx: the same set Confluent's own clients retry) move on to the next URL; when
every URL failed, the round is retried after a backoff with full jitter, up to
``max.retries`` times. Any other answer, an error included, is the registry's and is
returned at once: a 4xx is never retried. A refused sign-in (401/403) is raised here,
naming the option that holds the credentials; other errors are for the caller to name.
"""

from __future__ import annotations

import base64
import http.client
import json
import random
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from .._version import __version__
from ..errors import ConfigError, SchemaRegistryError
from .registry_config import CA, CERT, KEY, KEY_PASSWORD, TOKEN, USER_INFO, RegistryConfig

#: Answers that say "try again, maybe elsewhere" (Confluent's clients retry the same set).
RETRIABLE = frozenset({408, 429, 500, 502, 503, 504})
_ACCEPT = ("application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, "
           "application/json")
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass(frozen=True)
class Answer:
    """A registry's answer: its URL, HTTP status, decoded JSON body (None if empty or not
    JSON) and, for an error, the registry's ``error_code`` and ``message``."""

    url: str
    status: int
    body: Any
    error_code: int | None = None
    message: str | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def quoted(self) -> str:
        """The registry's own words, for a message: ``HTTP 404, error_code 40403: ...``."""
        parts = [f"HTTP {self.status}"]
        if self.error_code is not None:
            parts.append(f"error_code {self.error_code}")
        text = ", ".join(parts)
        if self.message:
            text += f": {self.message}"
        elif self.body is None:
            text += " with no registry error in the body"
        return text


class Transport:
    """Sends requests for one :class:`RegistryConfig`; remembers which URL answered last,
    so a registry whose first URL is down costs one failed connection, not one a request."""

    def __init__(self, config: RegistryConfig) -> None:
        self.config = config
        self._preferred = 0
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None

    def request(self, method: str, path: str, body: Any = None) -> Answer:
        """The first answer that is not a connection failure or a retriable status; raises
        SchemaRegistryError when every URL failed on every round, or the sign-in was
        refused."""
        cfg = self.config
        data = None if body is None else json.dumps(body).encode()
        failures: list[str] = []
        started = time.monotonic()
        for attempt in range(cfg.max_retries + 1):
            if attempt:
                cap = min(cfg.retries_wait_ms * 2 ** (attempt - 1), cfg.retries_max_wait_ms)
                time.sleep(random.random() * cap / 1000)  # backoff between rounds
            first = self._preferred
            for step in range(len(cfg.urls)):
                index = (first + step) % len(cfg.urls)
                base = cfg.urls[index]
                try:
                    answer = self._send(base, method, path, data)
                except _Unreachable as exc:
                    failures.append(f"{base} ({exc})")
                    continue
                if answer.status in RETRIABLE:
                    failures.append(f"{base} ({answer.quoted()})")
                    continue
                self._preferred = index
                if answer.status in (401, 403):
                    raise SchemaRegistryError(_refused(cfg, method, path, answer))
                return answer
        elapsed = time.monotonic() - started
        tries = cfg.max_retries + 1
        raise SchemaRegistryError(
            f"the schema registry did not answer {method} {path}: "
            f"{'; '.join(_last_per_url(failures, cfg.urls))}; {tries} round"
            f"{'s' if tries > 1 else ''} over {elapsed:.1f} s. Check schema.registry.url and "
            f"that the registry is up and reachable from the driver and every executor "
            f"(schema.registry.max.retries and schema.registry.request.timeout.ms bound the "
            f"wait).")

    # -- one attempt ---------------------------------------------------------------------

    def _send(self, base: str, method: str, path: str, data: bytes | None) -> Answer:
        cfg = self.config
        headers = {"Accept": _ACCEPT, "User-Agent": f"eoskafka/{__version__}"}
        if data is not None:
            headers["Content-Type"] = _CONTENT_TYPE
        if cfg.bearer_token is not None:
            headers["Authorization"] = f"Bearer {cfg.bearer_token}"
            if cfg.logical_cluster:
                headers["target-sr-cluster"] = cfg.logical_cluster
            if cfg.identity_pool:
                headers["Confluent-Identity-Pool-Id"] = cfg.identity_pool
        elif cfg.basic is not None:
            raw = f"{cfg.basic[0]}:{cfg.basic[1]}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(raw).decode()
        req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
        context = self._ssl() if base.startswith("https://") else None
        try:
            with urllib.request.urlopen(req, timeout=cfg.timeout_ms / 1000,
                                        context=context) as resp:
                return _answer(base, resp.status, resp.read())
        except urllib.error.HTTPError as err:
            with err:
                return _answer(base, err.code, err.read())
        except urllib.error.URLError as err:
            reason = err.reason
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise SchemaRegistryError(_tls_refused(base, reason)) from None
            if isinstance(reason, ssl.SSLError):
                raise _Unreachable(self._tls_failed(reason)) from None
            raise _Unreachable(reason if isinstance(reason, str) else _why(reason)) from None
        except TimeoutError:
            raise _Unreachable(f"no answer within {cfg.timeout_ms} ms") from None
        except ssl.SSLError as err:  # after the handshake: TLS 1.3 refuses a client late
            raise _Unreachable(self._tls_failed(err)) from None
        except (OSError, http.client.HTTPException) as err:
            raise _Unreachable(_why(err)) from None

    def _tls_failed(self, err: ssl.SSLError) -> str:
        hint = ("; a registry that requires a client certificate hangs up like this: set "
                f"{CERT} and {KEY}" if self.config.certificate_location is None else "")
        return f"TLS failed: {err.reason or err}{hint}"

    def _ssl(self) -> ssl.SSLContext:
        with self._lock:
            if self._context is None:
                self._context = tls_context(self.config)
            return self._context


class _Unreachable(Exception):
    """A connection failure, no answer from the registry at all."""


def tls_context(cfg: RegistryConfig) -> ssl.SSLContext:
    """Verifying context (hostname checked) with the configured CA, else the system's, and
    the client certificate for mutual TLS. A file that cannot be loaded is a ConfigError
    naming its option."""
    try:
        context = ssl.create_default_context(cafile=cfg.ca_location)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{CA}: cannot load {cfg.ca_location!r} as PEM CA certificates "
                          f"({_why(exc)}); give the PEM file of the CA that signed the "
                          f"registry's certificate.") from None
    if cfg.certificate_location is not None:
        try:
            context.load_cert_chain(cfg.certificate_location, cfg.key_location,
                                    password=cfg.key_password)
        except (OSError, ssl.SSLError) as exc:
            options = ", ".join(o for o, v in ((CERT, cfg.certificate_location),
                                               (KEY, cfg.key_location),
                                               (KEY_PASSWORD, cfg.key_password)) if v)
            raise ConfigError(f"cannot load the client certificate and key ({options}): "
                              f"{_why(exc)}. Check the PEM files and the key's "
                              f"password.") from None
    return context


def _answer(base: str, status: int, raw: bytes) -> Answer:
    body: Any = None
    if raw:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
    code = message = None
    if not 200 <= status < 300 and isinstance(body, dict):
        if isinstance(body.get("error_code"), int):
            code = body["error_code"]
        if isinstance(body.get("message"), str):
            message = body["message"]
    return Answer(base, status, body, code, message)


def _refused(cfg: RegistryConfig, method: str, path: str, answer: Answer) -> str:
    option = cfg.sign_in_option
    where = f"the schema registry at {answer.url} refused {method} {path} ({answer.quoted()})"
    if option is None:
        return (f"{where}: no credentials were sent; set {USER_INFO} (\"user:password\") or "
                f"{TOKEN}.")
    if answer.status == 401:
        return f"{where}: the sign-in failed; fix {option}."
    return (f"{where}: the credentials in {option} were accepted but may not do this; grant "
            f"that principal access to the registry, or fix {option}.")


def _tls_refused(base: str, err: ssl.SSLCertVerificationError) -> str:
    return (f"the schema registry at {base} failed TLS verification "
            f"({err.verify_message or err.reason}): set {CA} to the PEM file of the CA that "
            f"signed its certificate, and use the host name the certificate names.")


def _why(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "timed out"
    if isinstance(exc, socket.gaierror):
        return f"unknown host: {exc.strerror or exc}"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return str(text)


def _last_per_url(failures: list[str], urls: tuple[str, ...]) -> list[str]:
    """The last failure of each URL, in the configured order."""
    last: dict[str, str] = {}
    for failure in failures:
        last[failure.split(" ", 1)[0]] = failure
    return [last[u] for u in urls if u in last]
