"""The ``schema.registry.*`` options, parsed once into a frozen, picklable config.

The config is built on the driver and shipped to every executor inside the reader's and
writer's pickled state, so it holds plain values only (paths, not loaded certificates). Key
names are those of Confluent's clients (the Python client's names behind the
``schema.registry.`` prefix that Confluent's Java serializers and Spark jobs use); Spark
options are case-insensitive, so keys are matched lower-cased.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..client.keys import closest
from ..errors import ConfigError

PREFIX = "schema.registry."
URL = "schema.registry.url"
BASIC_SOURCE = "schema.registry.basic.auth.credentials.source"
USER_INFO = "schema.registry.basic.auth.user.info"
BEARER_SOURCE = "schema.registry.bearer.auth.credentials.source"
TOKEN = "schema.registry.bearer.auth.token"
LOGICAL_CLUSTER = "schema.registry.bearer.auth.logical.cluster"
IDENTITY_POOL = "schema.registry.bearer.auth.identity.pool.id"
CA = "schema.registry.ssl.ca.location"
CERT = "schema.registry.ssl.certificate.location"
KEY = "schema.registry.ssl.key.location"
KEY_PASSWORD = "schema.registry.ssl.key.password"
TIMEOUT = "schema.registry.request.timeout.ms"
MAX_RETRIES = "schema.registry.max.retries"
RETRIES_WAIT = "schema.registry.retries.wait.ms"
RETRIES_MAX_WAIT = "schema.registry.retries.max.wait.ms"

#: Every ``schema.registry.*`` option, in its canonical spelling (for the options' allowed
#: sets and their documentation).
REGISTRY_OPTIONS: tuple[str, ...] = (
    URL, BASIC_SOURCE, USER_INFO, BEARER_SOURCE, TOKEN, LOGICAL_CLUSTER, IDENTITY_POOL,
    CA, CERT, KEY, KEY_PASSWORD, TIMEOUT, MAX_RETRIES, RETRIES_WAIT, RETRIES_MAX_WAIT,
)
#: Options whose values are never shown (messages, reprs, logs).
SECRET_OPTIONS = frozenset({USER_INFO, TOKEN, KEY_PASSWORD})

DEFAULT_TIMEOUT_MS = 10_000
DEFAULT_MAX_RETRIES = 3
DEFAULT_RETRIES_WAIT_MS = 1_000
DEFAULT_RETRIES_MAX_WAIT_MS = 20_000


@dataclass(frozen=True)
class RegistryConfig:
    """Where the registry is and how to sign in. Secrets are left out of ``repr`` (a config
    can end up in a log line or a Spark plan string)."""

    #: Base URLs without credentials or a trailing slash, tried in order.
    urls: tuple[str, ...]
    #: HTTP basic sign-in (``user``, ``password``), from user.info or the URL's userinfo.
    basic: tuple[str, str] | None = field(default=None, repr=False)
    #: The option the basic credentials came from, named when the registry refuses them.
    basic_option: str = USER_INFO
    bearer_token: str | None = field(default=None, repr=False)
    logical_cluster: str | None = None
    identity_pool: str | None = None
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = field(default=None, repr=False)
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    max_retries: int = DEFAULT_MAX_RETRIES
    retries_wait_ms: int = DEFAULT_RETRIES_WAIT_MS
    retries_max_wait_ms: int = DEFAULT_RETRIES_MAX_WAIT_MS

    @property
    def sign_in_option(self) -> str | None:
        """The option that holds the credentials sent, for a refused sign-in's message."""
        if self.bearer_token is not None:
            return TOKEN
        if self.basic is not None:
            return self.basic_option
        return None

    @property
    def tls(self) -> bool:
        return any(u.startswith("https://") for u in self.urls)

    @staticmethod
    def parse(options: Mapping[str, str]) -> RegistryConfig | None:
        """The registry config of a reader's or writer's options; None when no
        ``schema.registry.*`` option is given. Raises ConfigError for an unknown key (naming
        the closest), a malformed value, or a sign-in or TLS setting that cannot work."""
        opts = {k.strip().lower(): v for k, v in options.items()
                if k.strip().lower().startswith(PREFIX)}
        if not opts:
            return None
        _reject_unknown(opts)
        raw_urls = opts.get(URL)
        if raw_urls is None or not raw_urls.strip():
            raise ConfigError(
                f"{URL} is required with the other schema.registry.* options "
                f"({', '.join(sorted(opts))}): set it to the registry's base URL, e.g. "
                f"http://registry:8081 (several, comma-separated, are tried in order).")
        urls, url_basic = _urls(raw_urls)
        basic, basic_option = _basic(opts, url_basic)
        token = _token(opts)
        if basic is not None and token is not None:
            raise ConfigError(
                f"{basic_option} and {TOKEN} are both set: a registry takes one sign-in. "
                f"Keep the one the registry expects and remove the other.")
        for header_option in (LOGICAL_CLUSTER, IDENTITY_POOL):
            if opts.get(header_option) and token is None:
                raise ConfigError(f"{header_option} goes with a bearer token: set {TOKEN} "
                                  f"too, or remove it.")
        tls = {k: opts[k].strip() for k in (CA, CERT, KEY, KEY_PASSWORD) if opts.get(k)}
        if tls and not all(u.startswith("https://") for u in urls):
            plain = next(u for u in urls if not u.startswith("https://"))
            raise ConfigError(
                f"{', '.join(sorted(tls))} set, but {URL} has {plain}, which is not https: "
                f"TLS settings would be ignored there. Use https:// URLs, or remove them.")
        if (KEY in tls or KEY_PASSWORD in tls) and CERT not in tls:
            raise ConfigError(
                f"{KEY if KEY in tls else KEY_PASSWORD} needs {CERT} (the client certificate "
                f"the key belongs to): set it, or remove the key settings.")
        return RegistryConfig(
            urls=urls, basic=basic, basic_option=basic_option, bearer_token=token,
            logical_cluster=_text(opts, LOGICAL_CLUSTER),
            identity_pool=_text(opts, IDENTITY_POOL),
            ca_location=tls.get(CA), certificate_location=tls.get(CERT),
            key_location=tls.get(KEY),
            key_password=opts.get(KEY_PASSWORD) if KEY_PASSWORD in tls else None,
            timeout_ms=_int(opts, TIMEOUT, DEFAULT_TIMEOUT_MS, minimum=1),
            max_retries=_int(opts, MAX_RETRIES, DEFAULT_MAX_RETRIES, minimum=0),
            retries_wait_ms=_int(opts, RETRIES_WAIT, DEFAULT_RETRIES_WAIT_MS, minimum=0),
            retries_max_wait_ms=_int(opts, RETRIES_MAX_WAIT, DEFAULT_RETRIES_MAX_WAIT_MS,
                                     minimum=0),
        )


def _reject_unknown(opts: Mapping[str, str]) -> None:
    known = {k.lower() for k in REGISTRY_OPTIONS}
    for key in sorted(opts):
        if key not in known:
            near = closest(key, REGISTRY_OPTIONS)
            hint = f" Did you mean '{near}'?" if near else ""
            raise ConfigError(
                f"unknown option '{key}'.{hint} The schema registry options are "
                f"{', '.join(REGISTRY_OPTIONS)} (names are case-insensitive).")


def _urls(raw: str) -> tuple[tuple[str, ...], tuple[str, str] | None]:
    """The base URLs without credentials, and the credentials of the first URL that has
    some (Confluent's ``basic.auth.credentials.source=URL``)."""
    urls: list[str] = []
    creds: tuple[str, str] | None = None
    for part in raw.split(","):
        text = part.strip().rstrip("/")
        if not text:
            continue
        parsed = urllib.parse.urlsplit(text)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            shown = text if "@" not in text else "<a URL with credentials>"
            raise ConfigError(
                f"{URL} must be http:// or https:// URLs (comma-separated), got {shown!r}: "
                f"give the registry's base URL, e.g. http://registry:8081.")
        if parsed.username is not None:
            if creds is None:
                creds = (urllib.parse.unquote(parsed.username),
                         urllib.parse.unquote(parsed.password or ""))
            netloc = parsed.netloc.rpartition("@")[2]
            parsed = parsed._replace(netloc=netloc)
        if parsed.query or parsed.fragment:
            raise ConfigError(f"{URL}: {urllib.parse.urlunsplit(parsed)!r} has a query or "
                              f"fragment; give the registry's base URL only.")
        urls.append(urllib.parse.urlunsplit(parsed))
    if not urls:
        raise ConfigError(f"{URL} is empty: give the registry's base URL.")
    return tuple(urls), creds


def _basic(opts: Mapping[str, str],
           url_creds: tuple[str, str] | None) -> tuple[tuple[str, str] | None, str]:
    source = (opts.get(BASIC_SOURCE) or "").strip().upper() or None
    if source not in (None, "USER_INFO", "URL"):
        raise ConfigError(
            f"{BASIC_SOURCE} must be USER_INFO (credentials in {USER_INFO}) or URL "
            f"(in {URL}'s user:password@), got {opts[BASIC_SOURCE].strip()!r}; eoskafka "
            f"does not take SASL_INHERIT.")
    info = opts.get(USER_INFO)
    if info is not None and url_creds is not None:
        raise ConfigError(
            f"{USER_INFO} is set and {URL} carries credentials too: keep one of them.")
    if source == "URL" or (source is None and url_creds is not None):
        if url_creds is None:
            raise ConfigError(f"{BASIC_SOURCE}=URL, but {URL} carries no user:password@; "
                              f"put them in the URL or use {USER_INFO}.")
        return url_creds, URL
    if info is None:
        if source == "USER_INFO":
            raise ConfigError(f"{BASIC_SOURCE}=USER_INFO needs {USER_INFO} "
                              f"(\"user:password\"): set it.")
        return None, USER_INFO
    user, sep, password = info.partition(":")
    if not sep or not user:
        raise ConfigError(f"{USER_INFO} must be \"user:password\" (a user, a colon, then "
                          f"the password); the value given has no user before a colon.")
    return (user, password), USER_INFO


def _token(opts: Mapping[str, str]) -> str | None:
    source = (opts.get(BEARER_SOURCE) or "").strip().upper() or None
    if source not in (None, "STATIC_TOKEN"):
        raise ConfigError(
            f"{BEARER_SOURCE} must be STATIC_TOKEN (the token in {TOKEN}), got "
            f"{opts[BEARER_SOURCE].strip()!r}: eoskafka does not fetch OAuth tokens for the "
            f"registry itself; pass one in {TOKEN}.")
    token = opts.get(TOKEN)
    if token is not None and not token.strip():
        raise ConfigError(f"{TOKEN} is empty: give the token, or remove the option.")
    if source == "STATIC_TOKEN" and token is None:
        raise ConfigError(f"{BEARER_SOURCE}=STATIC_TOKEN needs {TOKEN}: set it.")
    return token.strip() if token is not None else None


def _text(opts: Mapping[str, str], key: str) -> str | None:
    value = opts.get(key)
    return value.strip() if value and value.strip() else None


def _int(opts: Mapping[str, str], key: str, default: int, *, minimum: int) -> int:
    raw = opts.get(key)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = minimum - 1
    if value < minimum:
        bound = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ConfigError(f"{key} must be {bound}, got {raw!r}.")
    return value
