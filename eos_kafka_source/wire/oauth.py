"""OAUTHBEARER tokens: fetched, cached per process, refreshed before they expire.

Runs wherever connections are made: the driver (planning, commit) and every task on the
executors. Each Python process keeps one :class:`TokenSource` per
:class:`~eos_kafka_source.client.oauth.OAuthSettings` (nothing is pickled but the
settings), so the tasks a worker runs one after another share a token instead of asking
the identity provider each time. kafka-python asks for a token at every SASL
authentication: a new connection, and KIP-368 re-authentication of an open one (which
kafka-python 3.0 does when the broker sets ``connections.max.reauth.ms``); the source
answers its cached token while it is fresh and fetches a new one once the refresh time
has passed (:meth:`OAuthSettings <eos_kafka_source.client.oauth.OAuthSettings>` says
when), so a query that runs for days never presents an expired token.

A failed refresh (the identity provider down, slow or refusing) does not break sign-in
while the cached token is still valid: as Kafka's Java login does, the source keeps it
(logging a warning) and asks again after ``sasl.login.retry.backoff.ms``, doubling with
jitter up to ``sasl.login.retry.backoff.max.ms``, never more often, however many
connections sign in meanwhile. Sign-in fails only once the token has expired, naming the
provider's failure.

Tokens come from one of:

- the OIDC client-credentials grant (RFC 6749 section 4.4), as Kafka's Java
  ``OAuthBearerLoginCallbackHandler`` does it: a form POST to the token endpoint with
  the client id and secret in HTTP Basic auth, reading ``access_token`` and
  ``expires_in`` (the JWT's own ``exp`` wins when it is earlier);
- a Python callable (``module:callable``) returning ``(token, expires_at)``, with
  ``expires_at`` in seconds (or milliseconds, as AWS's MSK signer returns it) since the
  epoch: AWS MSK IAM, Azure Entra, GCP, anything else (docs/security.md).

Failures are :class:`OAuthTokenError` (an authentication error) naming the option to fix.
"""

from __future__ import annotations

import base64
import importlib
import json
import logging
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from kafka.net.sasl import register_sasl_mechanism
from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth

from ..client.oauth import JAAS, OAuthSettings
from ..errors import AuthenticationError
from .redact import protect

log = logging.getLogger(__name__)

#: A token whose expiry is this close is not handed out (it could expire in flight).
MIN_LEFT_S = 1.0
#: Spread of each retry backoff, as Kafka's ExponentialBackoff (+-20 %).
_BACKOFF_JITTER = 0.2


class OAuthTokenError(AuthenticationError):
    """No usable OAUTHBEARER token: the token endpoint or provider failed, or the token
    it gave has expired."""


def jwt_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT, unverified (the broker verifies), or {} if not a JWT. Used
    for its expiry and, in error messages, its audience and issuer (no secret there)."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload)
    except (ValueError, TypeError):
        return {}
    return claims if isinstance(claims, dict) else {}


def describe_claims(token: str | None) -> str:
    """``aud=..., iss=..., sub=..., expires in N s`` of a JWT, for messages."""
    claims = jwt_claims(token or "")
    if not claims:
        return "not a JWT"
    shown = [f"{k}={claims[k]!r}" for k in ("aud", "iss", "sub", "scope") if k in claims]
    if isinstance(claims.get("exp"), (int, float)):
        left = claims["exp"] - time.time()
        shown.append(f"expires in {left:.0f} s" if left > 0 else f"expired {-left:.0f} s ago")
    return ", ".join(shown)


class TokenSource(AbstractTokenProvider):
    """The token for one :class:`OAuthSettings` in this process; thread-safe.

    kafka-python calls :meth:`token` at each SASL authentication and :meth:`extensions`
    for the SASL extensions (``extension_*`` of the JAAS line, e.g. Confluent Cloud's
    ``logicalCluster`` and ``identityPoolId``).
    """

    def __init__(self, settings: OAuthSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires_at = 0.0
        self._refresh_at = 0.0
        #: Tokens fetched by this process (tests count refreshes with it).
        self.fetched = 0
        #: The broker's last refusal of a token (its OAUTHBEARER error JSON), for messages.
        self.last_refusal: str | None = None
        #: Failed fetches in a row, the last one's error, and when the next may be tried.
        self.failures = 0
        self._failure: OAuthTokenError | None = None
        self._retry_at = 0.0

    def token(self) -> str:
        with self._lock:
            now = time.time()
            if self._token is not None and now < self._refresh_at:
                return self._token
            if self._failure is None or now >= self._retry_at:
                try:
                    self._fetch(now)
                except OAuthTokenError as exc:
                    self._failed(exc)
                else:
                    self.failures, self._failure = 0, None
            return self._kept()

    def _failed(self, exc: OAuthTokenError) -> None:
        """Back off before the next fetch: ``retry_backoff_ms`` doubling per failure, with
        jitter, at most ``retry_backoff_max_ms`` (Kafka's ``sasl.login.retry.backoff.*``)."""
        s = self.settings
        self.failures += 1
        self._failure = exc
        term = s.retry_backoff_ms * 2.0 ** (self.failures - 1)
        wait_ms = min(term * random.uniform(1 - _BACKOFF_JITTER, 1 + _BACKOFF_JITTER),
                      s.retry_backoff_max_ms)
        now = time.time()
        self._retry_at = now + wait_ms / 1000
        if self._token is not None and self._expires_at - now >= MIN_LEFT_S:
            log.warning("eoskafka: refreshing the OAUTHBEARER token failed (%d in a row, next "
                        "try in %.1f s); the cached token, valid for %.0f s more, signs in "
                        "meanwhile: %s", self.failures, wait_ms / 1000,
                        self._expires_at - now, exc)

    def _kept(self) -> str:
        """The cached token while it is valid (a refresh may have failed); else the failure."""
        now = time.time()
        if self._token is not None and self._expires_at - now >= MIN_LEFT_S:
            return self._token
        assert self._failure is not None
        if self._token is None and self.failures == 1:
            raise self._failure.with_traceback(None)  # the first attempt's error, as it came
        left = self._expires_at - now
        why = ("no OAUTHBEARER token could be fetched" if self._token is None else
               f"the cached OAUTHBEARER token expired {-left:.0f} s ago" if left <= 0 else
               f"the cached OAUTHBEARER token expires in {left:.1f} s")
        raise OAuthTokenError(
            f"{why} and the last {self.failures} attempt(s) to get one failed (next in "
            f"{max(self._retry_at - now, 0):.1f} s): {self._failure}")

    def extensions(self) -> dict[str, str]:
        return dict(self.settings.extensions)

    @property
    def current(self) -> str | None:
        """The cached token, without fetching (for messages)."""
        return self._token

    def expires_at(self) -> float:
        return self._expires_at

    def _fetch(self, now: float) -> None:
        s = self.settings
        token, expires_at = (_from_provider(s) if s.provider else _from_endpoint(s))
        claims_exp = jwt_claims(token).get("exp")
        if isinstance(claims_exp, (int, float)):
            expires_at = min(expires_at, float(claims_exp))
        now = time.time()
        if expires_at - now < MIN_LEFT_S:
            raise OAuthTokenError(
                f"the OAUTHBEARER token from {s.source} has expired (its expiry is "
                f"{now - expires_at:.0f} s in the past; {describe_claims(token)}); check the "
                "identity provider's token lifetime and this host's clock"
                + ("" if not s.provider else ", and that the provider returns a fresh token "
                   "and its expiry in seconds (or milliseconds) since the epoch")
            )
        protect((token,))
        lifetime = expires_at - now
        refresh_at = now + s.refresh_window_factor * lifetime
        if lifetime - s.refresh_buffer_s >= s.refresh_min_period_s:
            refresh_at = min(refresh_at, expires_at - s.refresh_buffer_s)
        self._token, self._expires_at, self._refresh_at = token, expires_at, refresh_at
        self.fetched += 1


def _from_endpoint(s: OAuthSettings) -> tuple[str, float]:
    """The client-credentials grant against ``s.token_endpoint_url``."""
    url = s.token_endpoint_url or ""
    form = {"grant_type": "client_credentials"}
    if s.scope:
        form["scope"] = s.scope
    basic = base64.b64encode(
        f"{urllib.parse.quote(s.client_id or '', safe='')}:"
        f"{urllib.parse.quote(s.client_secret or '', safe='')}".encode()).decode()
    request = urllib.request.Request(
        url, data=urllib.parse.urlencode(form).encode(), method="POST",
        headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                 "Content-Type": "application/x-www-form-urlencoded"})
    started = time.time()
    try:
        timeout_s = max(s.read_timeout_ms, s.connect_timeout_ms) / 1000  # one for both
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            body = answer.read()
    except urllib.error.HTTPError as exc:
        detail = _error_detail(exc)
        if exc.code in (400, 401, 403):
            raise OAuthTokenError(
                f"the token endpoint {s.source} refused the client credentials of "
                f"{s.client_id!r} (HTTP {exc.code}{detail}); check clientId and clientSecret "
                f"(and scope) in {JAAS}"
            ) from None
        raise OAuthTokenError(
            f"the token endpoint {s.source} failed (HTTP {exc.code}{detail}); check the URL "
            "and that the identity provider is healthy") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise OAuthTokenError(
            f"could not reach the token endpoint {s.source} ({type(reason).__name__}: "
            f"{reason}); check kafka.sasl.oauthbearer.token.endpoint.url and that the "
            "identity provider is reachable from this host (driver and executors)") from None
    try:
        answer_json = json.loads(body)
        token = str(answer_json["access_token"])
        expires_in = float(answer_json.get("expires_in", 3600))
    except (ValueError, KeyError, TypeError):
        raise OAuthTokenError(
            f"the token endpoint {s.source} answered without an access_token (not an OAuth "
            "2 token endpoint?); check kafka.sasl.oauthbearer.token.endpoint.url") from None
    return token, started + expires_in


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """``: invalid_client (...)`` from an OAuth error answer, if it is one."""
    try:
        body = json.loads(exc.read() or b"{}")
    except ValueError:
        return ""
    if not isinstance(body, dict) or "error" not in body:
        return ""
    text = str(body["error"])
    if body.get("error_description"):
        text += f" ({str(body['error_description'])[:200]})"
    return ": " + text


def _from_provider(s: OAuthSettings) -> tuple[str, float]:
    """``(token, expires_at seconds)`` from the ``module:callable`` provider."""
    module_name, _, attr = (s.provider or "").partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise OAuthTokenError(
            f"{s.source}: cannot import it ({type(exc).__name__}: {exc}); it must be "
            "importable on the driver and on every executor (ship it with "
            "spark.submit.pyFiles or install it there)") from None
    try:
        result = target()
    except Exception as exc:  # noqa: BLE001 - the user's code: report what it raised
        raise OAuthTokenError(
            f"the OAUTHBEARER token provider {s.source} raised "
            f"{type(exc).__name__}: {str(exc)[:300]}") from None
    try:
        token, expires_at = result
        token, expires_at = str(token), float(expires_at)
    except (TypeError, ValueError):
        raise OAuthTokenError(
            f"the OAUTHBEARER token provider {s.source} returned {type(result).__name__}; it "
            "must return (token, expires_at) with expires_at in seconds since the "
            "epoch") from None
    if expires_at > 1e11:  # milliseconds (AWS's MSKAuthTokenProvider returns those)
        expires_at /= 1000
    return token, expires_at


_SOURCES: dict[OAuthSettings, TokenSource] = {}
_SOURCES_LOCK = threading.Lock()


def token_provider(settings: OAuthSettings) -> TokenSource:
    """This process's token source for ``settings`` (made on first use)."""
    with _SOURCES_LOCK:
        source = _SOURCES.get(settings)
        if source is None:
            source = _SOURCES[settings] = TokenSource(settings)
        return source


class _OAuthMechanism(SaslMechanismOAuth):
    """kafka-python's OAUTHBEARER, keeping the broker's refusal (its OAUTHBEARER error
    JSON, e.g. ``{"status":"invalid_token"}``) on the token source for the error message;
    kafka-python only logs it."""

    def receive(self, auth_bytes: bytes) -> None:
        if auth_bytes and isinstance(self.token_provider, TokenSource):
            self.token_provider.last_refusal = auth_bytes.decode("utf-8", "replace")[:300]
        super().receive(auth_bytes)


register_sasl_mechanism("OAUTHBEARER", _OAuthMechanism, overwrite=True)
