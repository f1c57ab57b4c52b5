"""SASL/OAUTHBEARER options, read the way Kafka's Java client reads them (KIP-768).

A Spark user's options for ``format("kafka")`` work unchanged::

    kafka.security.protocol=SASL_SSL
    kafka.sasl.mechanism=OAUTHBEARER
    kafka.sasl.oauthbearer.token.endpoint.url=https://idp.example.com/oauth2/token
    kafka.sasl.login.callback.handler.class=
        org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler
    kafka.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule
        required clientId="..." clientSecret="..." scope="...";

or, for any other source of tokens (AWS MSK IAM, Azure Entra, GCP), eoskafka's own
``kafka.sasl.oauthbearer.token.provider=module:callable`` naming a Python callable that
returns ``(token, expires_at)`` (docs/security.md). Parsed on the driver into a frozen,
picklable :class:`OAuthSettings`; tokens are fetched where connections are made
(:mod:`eos_kafka_source.wire.oauth`), never pickled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

from ..errors import ConfigError

#: Kafka's login callback handler (3.1+), and its name before 3.4 (``secured`` package).
LOGIN_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
)
ENDPOINT = "kafka.sasl.oauthbearer.token.endpoint.url"
PROVIDER = "kafka.sasl.oauthbearer.token.provider"
JAAS = "kafka.sasl.jaas.config"
JAAS_HELP = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
             'clientId="CLIENT" clientSecret="SECRET" scope="SCOPE";')

#: OAUTHBEARER settings parsed here (names without ``kafka.``).
OAUTH_KEYS = frozenset({
    "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.token.provider",
    "sasl.login.callback.handler.class", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.buffer.seconds", "sasl.login.refresh.min.period.seconds",
    "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms",
    "sasl.login.retry.backoff.ms", "sasl.login.retry.backoff.max.ms",
    # KIP-1139: the client credentials outside the JAAS line (the JAAS keys are deprecated)
    "sasl.oauthbearer.client.credentials.client.id",
    "sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.scope",
    "sasl.oauthbearer.header.urlencode",
})
_PROVIDER_SHAPE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


@dataclass(frozen=True, repr=False)
class OAuthSettings:
    """Where OAUTHBEARER tokens come from, and when to refresh them; plain values, picklable.

    Exactly one of ``token_endpoint_url`` (OIDC client credentials) and ``provider``
    (``module:callable``) is set. A token is refreshed once ``refresh_window_factor`` of
    its lifetime has passed, or ``refresh_buffer_s`` before it expires, whichever is
    first, but never before ``refresh_min_period_s`` (unless the token is shorter-lived).
    A failed fetch is retried after ``retry_backoff_ms``, doubling up to
    ``retry_backoff_max_ms`` (as Kafka's Java login does); the cached token serves meanwhile.
    """

    token_endpoint_url: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    scope: str | None = None
    provider: str | None = None
    extensions: tuple[tuple[str, str], ...] = ()
    refresh_window_factor: float = 0.8
    refresh_buffer_s: float = 300.0
    refresh_min_period_s: float = 60.0
    connect_timeout_ms: int = 10_000
    read_timeout_ms: int = 10_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000

    def __repr__(self) -> str:
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            shown = '***' if f.name == 'client_secret' and value else repr(value)
            parts.append(f"{f.name}={shown}")
        return f"OAuthSettings({', '.join(parts)})"

    __str__ = __repr__

    @property
    def source(self) -> str:
        """The option a user fixes when tokens cannot be had: for error messages."""
        if self.provider:
            return f"{PROVIDER}={self.provider}"
        return f"{ENDPOINT}={self.token_endpoint_url}"

    @property
    def principal(self) -> str:
        """Who signs in, as messages show it (the client id, or the provider)."""
        return self.client_id or self.provider or "?"


def _number(kafka: Mapping[str, str], key: str, default: float, low: float,
            high: float | None = None) -> float:
    raw = kafka.get(key)
    if raw is None:
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        value = low - 1
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ConfigError(f"kafka.{key} must be a number {bound}, got {raw!r}.")
    return value


def parse_oauth(kafka: Mapping[str, str], jaas_module: str | None,
                jaas_pairs: Mapping[str, str]) -> OAuthSettings:
    """``kafka.*`` settings (without the prefix) of an OAUTHBEARER login -> settings.

    ``jaas_module``/``jaas_pairs``: the parsed ``kafka.sasl.jaas.config``, if given.
    """
    if jaas_module is not None and jaas_module != "OAuthBearerLoginModule":
        raise ConfigError(f"{JAAS} uses {jaas_module} but kafka.sasl.mechanism is "
                          f"OAUTHBEARER; write it as {JAAS_HELP}")
    if any(k.startswith("unsecuredLogin") for k in jaas_pairs):
        raise ConfigError(f"{JAAS} asks for unsecured (unsigned) OAUTHBEARER tokens, a "
                          "development mode of Kafka's; eoskafka signs in with real tokens "
                          f"only: set {ENDPOINT} and clientId/clientSecret ({JAAS_HELP}), or "
                          f"{PROVIDER}.")
    encode = kafka.get("sasl.oauthbearer.header.urlencode", "true").strip().lower()
    if encode != "true":
        raise ConfigError(f"kafka.sasl.oauthbearer.header.urlencode={encode!r}: eoskafka always "
                          "URL-encodes the client id and secret in the token request, as "
                          "RFC 6749 asks; remove it (or set true).")
    handler = kafka.get("sasl.login.callback.handler.class")
    if handler is not None and handler.strip() not in LOGIN_HANDLERS:
        raise ConfigError(
            f"kafka.sasl.login.callback.handler.class={handler.strip()!r}: Java callback "
            f"handlers cannot run in eoskafka's Python client. For OIDC client credentials "
            f"set it to {LOGIN_HANDLERS[0]} (or leave it out) with {ENDPOINT}; for any other "
            f"token source name a Python callable returning (token, expires_at) in "
            f"{PROVIDER} (docs/security.md)."
        )

    def one(pair: str, key: str) -> str | None:
        a, b = jaas_pairs.get(pair), kafka.get(key)
        if a is not None and b is not None and a != b:
            raise ConfigError(f"{JAAS} sets {pair} and kafka.{key} differs from it; keep one.")
        return a if a is not None else b

    client_id = one("clientId", "sasl.oauthbearer.client.credentials.client.id")
    secret = one("clientSecret", "sasl.oauthbearer.client.credentials.client.secret")
    scope = one("scope", "sasl.oauthbearer.scope")
    url, provider = kafka.get("sasl.oauthbearer.token.endpoint.url"), kafka.get(
        "sasl.oauthbearer.token.provider")
    if url is not None and provider is not None:
        raise ConfigError(f"{ENDPOINT} and {PROVIDER} are both set; tokens come from one "
                          "source: keep one.")
    if url is None and provider is None:
        raise ConfigError(
            f"kafka.sasl.mechanism=OAUTHBEARER needs a source of tokens: set {ENDPOINT} (the "
            f"identity provider's token endpoint) with {JAAS} = {JAAS_HELP}, or {PROVIDER} = "
            "module:callable returning (token, expires_at).")
    if url is not None:
        url = url.strip()
        if not url.lower().startswith(("https://", "http://")):
            raise ConfigError(f"{ENDPOINT}={url!r} is not an http(s) URL; eoskafka fetches "
                              "tokens with the client-credentials grant (file: URLs are "
                              f"not supported: use {PROVIDER} to read a token file).")
        if not client_id or not secret:
            raise ConfigError(f"{ENDPOINT} is set but the client credentials are missing: "
                              f"set clientId and clientSecret in {JAAS} ({JAAS_HELP}).")
    else:
        provider = (provider or "").strip()
        if not _PROVIDER_SHAPE.fullmatch(provider):
            raise ConfigError(f"{PROVIDER}={provider!r} must name a Python callable as "
                              "module:callable (e.g. mypackage.tokens:msk_token), importable "
                              "on the driver and every executor.")
    extensions = tuple(sorted((k[len("extension_"):], v) for k, v in jaas_pairs.items()
                              if k.startswith("extension_")))
    unknown = sorted(k for k in jaas_pairs if not k.startswith("extension_")
                     and k not in ("clientId", "clientSecret", "scope"))
    if unknown:
        raise ConfigError(f"{JAAS}: OAuthBearerLoginModule option(s) {', '.join(unknown)} "
                          "are not supported; eoskafka reads clientId, clientSecret, scope "
                          "and extension_* (remove the others).")
    return OAuthSettings(
        token_endpoint_url=url, client_id=client_id, client_secret=secret, scope=scope,
        provider=provider or None, extensions=extensions,
        refresh_window_factor=_number(kafka, "sasl.login.refresh.window.factor", 0.8, 0.5,
                                      1.0),
        refresh_buffer_s=_number(kafka, "sasl.login.refresh.buffer.seconds", 300, 0, 3600),
        refresh_min_period_s=_number(kafka, "sasl.login.refresh.min.period.seconds", 60, 0,
                                     900),
        connect_timeout_ms=int(_number(kafka, "sasl.login.connect.timeout.ms", 10_000, 1)),
        read_timeout_ms=int(_number(kafka, "sasl.login.read.timeout.ms", 10_000, 1)),
        retry_backoff_ms=int(_number(kafka, "sasl.login.retry.backoff.ms", 100, 0)),
        retry_backoff_max_ms=int(_number(kafka, "sasl.login.retry.backoff.max.ms", 10_000, 0)),
    )
