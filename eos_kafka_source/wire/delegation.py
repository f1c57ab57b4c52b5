"""Kafka delegation tokens (KIP-48): obtained on the driver, used by the tasks with SCRAM.

Spark's Kafka connector signs its executors in this way on Kerberos clusters: the driver,
which has the real credentials (a keytab, an OAuth client secret), asks the broker for a
delegation token with CreateDelegationToken, and the executors authenticate with SCRAM as
that token (user name = token id, password = its HMAC in base64, SCRAM extension
``tokenauth=true``), so they never hold the real credentials. :func:`create_token`
obtains one over any sign-in the driver's options give; :meth:`DelegationToken.task_options`
are the ``kafka.*`` options for the tasks; :class:`TokenRenewer` renews it on the driver
before it expires (``delegation.token.expiry.time.ms``, 24 h by default), up to its
maximum lifetime (``delegation.token.max.lifetime.ms``, 7 days), after which a new token
(and a restart of the query with it) is needed.

kafka-python 3.0 has neither the three requests nor SCRAM's ``tokenauth`` extension: the
requests are declared here from Kafka's protocol (schemas/), and :mod:`.token_scram`
adds the extension for the user names this process registered as tokens.

Runs on: the driver (create, renew, expire); the executors only sign in with the token.
"""

from __future__ import annotations

import base64
import itertools
import logging
import threading
import time
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_message import ApiMessage

from ..client.config import ClientConfig
from ..errors import AuthenticationError, EosKafkaError, for_code
from ..kafka_codes import Code
from . import schemas
from .connection import KafkaWire
from .retry import Deadline

log = logging.getLogger(__name__)


def _message(name: str) -> Any:
    """The kafka-python message class ``name``, read from our JSON schema (wire/schemas/).

    ``load_json`` goes to kafka-python's metaclass, not to ``__init_subclass__``, which a
    type checker cannot see from a class statement: the class is made with it explicitly."""
    def body(ns: dict[str, Any]) -> None:
        ns["__module__"] = __name__

    return types.new_class(name, (ApiMessage,), {"load_json": schemas}, body)


CreateDelegationTokenRequest = _message("CreateDelegationTokenRequest")
CreateDelegationTokenResponse = _message("CreateDelegationTokenResponse")
RenewDelegationTokenRequest = _message("RenewDelegationTokenRequest")
RenewDelegationTokenResponse = _message("RenewDelegationTokenResponse")
ExpireDelegationTokenRequest = _message("ExpireDelegationTokenRequest")
ExpireDelegationTokenResponse = _message("ExpireDelegationTokenResponse")


_CAPS = {"CreateDelegationTokenRequest": 2, "RenewDelegationTokenRequest": 2,
         "ExpireDelegationTokenRequest": 2}
_SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule"


class DelegationTokenError(EosKafkaError):
    """The broker would not create, renew or expire a delegation token."""

    condition = "EOSKAFKA_DELEGATION_TOKEN"


@dataclass(frozen=True, repr=False)
class DelegationToken:
    """A delegation token: its id, HMAC (the secret, never shown) and timestamps (ms)."""

    token_id: str
    hmac: bytes
    owner: str
    issued_ms: int
    expires_ms: int
    max_ms: int

    def __repr__(self) -> str:
        return (f"DelegationToken(token_id={self.token_id!r}, owner={self.owner!r}, "
                f"expires_ms={self.expires_ms}, max_ms={self.max_ms}, hmac=***)")

    @property
    def password(self) -> str:
        return base64.b64encode(self.hmac).decode()

    def task_options(self, options: Mapping[str, str],
                     mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        """``options`` with the sign-in replaced by SCRAM as this token: what the tasks get.

        The bootstrap servers, TLS files and every non-SASL option are kept; the listener
        must enable ``mechanism`` (SCRAM-SHA-256 or -512; the token works with both).
        """
        kept = {k: v for k, v in options.items() if not k.lower().startswith("kafka.sasl.")}
        return {**kept, "kafka.sasl.mechanism": mechanism,
                "kafka.sasl.jaas.config": f'{_SCRAM_JAAS} required username="{self.token_id}" '
                                          f'password="{self.password}" tokenauth="true";'}


def _call(wire: KafkaWire, request_cls: Any, what: str, **fields: Any) -> Any:
    cap = _CAPS[request_cls.__name__]
    version = int(wire.client.api_version(request_cls, max_version=cap))
    response = wire.request_any(request_cls(version=version, **fields), what, resend=False)
    if response.error_code:
        error = for_code(response.error_code)
        hint = {
            Code.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED:
                "the listener must authenticate the caller with SASL or TLS (not PLAINTEXT), "
                "and a delegation token cannot create another",
            Code.DELEGATION_TOKEN_AUTH_DISABLED:
                "the broker has no delegation.token.secret.key: delegation tokens are off",
            Code.DELEGATION_TOKEN_NOT_FOUND:
                "the broker does not know this token (expired, or never created)",
            Code.DELEGATION_TOKEN_OWNER_MISMATCH: "only the token's owner or a renewer may do this",
            Code.INVALID_PRINCIPAL_TYPE: "a token's owner and renewers are User: principals",
            Code.DELEGATION_TOKEN_EXPIRED:
                "the token has passed its expiry or maximum lifetime; create a new one",
        }.get(response.error_code, "")
        raise DelegationTokenError(
            f"{what} failed: {error.__name__} ({response.error_code})"
            + (f"; {hint}" if hint else ""))
    return response


def create_token(options: Mapping[str, str], max_lifetime_ms: int = -1,
                 mechanism: str | None = "SCRAM-SHA-512") -> DelegationToken:
    """A new delegation token owned by whoever ``options`` sign in as (driver side).

    With ``mechanism`` (the one :meth:`DelegationToken.task_options` will use), it returns
    once a sign-in as the token succeeds: the broker that created it answers before its
    own token cache has it (measured on Kafka 4.4: the first sign-in right after was
    refused), and a listener that does not enable the mechanism fails here, on the
    driver, rather than in every task.
    """
    config = ClientConfig.from_options(options)
    with KafkaWire(config) as wire:
        r = _call(wire, CreateDelegationTokenRequest, "CreateDelegationToken", renewers=[],
                  max_lifetime_ms=max_lifetime_ms)
    token = DelegationToken(r.token_id, bytes(r.hmac), f"{r.principal_type}:{r.principal_name}",
                            r.issue_timestamp_ms, r.expiry_timestamp_ms, r.max_timestamp_ms)
    if mechanism is not None:
        _await_usable(token.task_options(options, mechanism), config.api_timeout_s)
    return token


def _await_usable(task_options: Mapping[str, str], timeout_s: float) -> None:
    """Sign in as the token until the broker accepts it (within ``timeout_s``)."""
    from .cluster import fetch_metadata

    deadline = Deadline(timeout_s)  # the broker's token cache catches up in milliseconds
    for attempt in itertools.count(1):
        try:
            with KafkaWire(ClientConfig.from_options(task_options)) as wire:
                fetch_metadata(wire, [])
            log.debug("delegation token usable at sign-in attempt %d", attempt)
            return
        except AuthenticationError as exc:
            if "does not accept SASL" in str(exc) or not deadline.pause():
                raise DelegationTokenError(
                    f"the new delegation token cannot sign in: {exc}") from None


def renew_token(options: Mapping[str, str], token: DelegationToken,
                period_ms: int = -1) -> int:
    """Renew ``token`` (by its owner's sign-in, ``options``); its new expiry (ms)."""
    with KafkaWire(ClientConfig.from_options(options)) as wire:
        r = _call(wire, RenewDelegationTokenRequest, "RenewDelegationToken",
                  hmac=token.hmac, renew_period_ms=period_ms)
    return int(r.expiry_timestamp_ms)


def expire_token(options: Mapping[str, str], token: DelegationToken,
                 period_ms: int = -1) -> int:
    """Expire ``token`` in ``period_ms`` (-1: now); its new expiry (ms)."""
    with KafkaWire(ClientConfig.from_options(options)) as wire:
        r = _call(wire, ExpireDelegationTokenRequest, "ExpireDelegationToken",
                  hmac=token.hmac, expiry_time_period_ms=period_ms)
    return int(r.expiry_timestamp_ms)


class TokenRenewer:
    """Renews a token on the driver when half the time to its expiry has passed, until its
    maximum lifetime; :meth:`start` and :meth:`stop` (or ``with``) run it. A failed
    renewal is retried (logged) until the token expires; :attr:`error` keeps the last
    failure."""

    def __init__(self, options: Mapping[str, str], token: DelegationToken) -> None:
        self.options, self.token = dict(options), token
        self.expires_ms = token.expires_ms
        self.renewals = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="eoskafka-token-renewer",
                                        daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            now_ms = time.time() * 1000
            if self.expires_ms >= self.token.max_ms or now_ms >= self.expires_ms:
                return  # nothing left to renew: the token ends at its maximum lifetime
            wait_s = max((self.expires_ms - now_ms) / 2000, 0.2)
            if self._stop.wait(wait_s):
                return
            try:
                self.expires_ms = renew_token(self.options, self.token)
                self.renewals += 1
            except Exception as exc:  # noqa: BLE001 - retried until the token expires
                self.error = exc
                log.warning("renewing delegation token %s failed: %s", self.token.token_id, exc)

    def start(self) -> TokenRenewer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def __enter__(self) -> TokenRenewer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
