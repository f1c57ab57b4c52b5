"""``kafka.ssl.enabled.protocols``, ``kafka.ssl.protocol`` and ``kafka.ssl.cipher.suites``
-> the TLS versions and cipher suites a connection may use.

Users set these to keep connections off a version or suite they do not accept, so they are
honoured, never dropped: kafka-python takes a ready ``ssl.SSLContext``, built here from the
frozen :class:`TlsSettings` (contexts do not pickle) with the same files and host check
kafka-python would use. Java names the suites by their IANA names, OpenSSL by its own:
both are accepted. Python's ``ssl`` cannot narrow TLS 1.3's suites, so those are taken all
(as OpenSSL offers them) or none (TLS 1.2 only); a part of them is refused.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ConfigError

_VERSIONS = {"TLSV1.2": "TLSv1.2", "TLSV1.3": "TLSv1.3"}
_OLD = ("SSLV2", "SSLV3", "TLSV1", "TLSV1.1")
#: The TLS 1.3 suites OpenSSL offers by default: all of them, or none, can be asked for.
TLS13_SUITES = ("TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                "TLS_AES_128_GCM_SHA256")
#: Java (IANA) names of the TLS 1.2 suites Python's default context offers -> OpenSSL's.
IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
}
KEYS = ("ssl.enabled.protocols", "ssl.protocol", "ssl.cipher.suites")


@dataclass(frozen=True)
class TlsSettings:
    """The TLS versions (``minimum``..``maximum``) and TLS 1.2 suites (OpenSSL's cipher
    string; None: OpenSSL's defaults) a connection may use; picklable."""

    minimum: str = "TLSv1.2"
    maximum: str = "TLSv1.3"
    ciphers: str | None = None

    def context(self, cafile: str | None, certfile: str | None, keyfile: str | None,
                password: str | None, check_hostname: bool) -> ssl.SSLContext:
        """The context kafka-python would build from the same files, narrowed to these
        versions and suites."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion[self.minimum.replace(".", "_")]
        ctx.maximum_version = ssl.TLSVersion[self.maximum.replace(".", "_")]
        if self.ciphers is not None:
            ctx.set_ciphers(self.ciphers)
        ctx.check_hostname = check_hostname
        if cafile:
            ctx.load_verify_locations(cafile)
        else:
            ctx.load_default_certs()
        if certfile:
            ctx.load_cert_chain(certfile=certfile, keyfile=keyfile, password=password)
        return ctx


def _version(key: str, raw: str) -> str:
    name = raw.strip().upper()
    if name in _OLD:
        raise ConfigError(f"kafka.{key}: {raw.strip()} is refused: TLS before 1.2 is broken "
                          "and Kafka's clients no longer enable it; use TLSv1.2 or TLSv1.3.")
    if name not in _VERSIONS:
        raise ConfigError(f"kafka.{key}: {raw.strip()!r} is not a TLS version; use TLSv1.2 "
                          "or TLSv1.3 (a comma-separated list for kafka.ssl.enabled.protocols).")
    return _VERSIONS[name]


def _suites(raw: str) -> tuple[str | None, bool]:
    """(OpenSSL cipher string of the TLS 1.2 suites or None, whether TLS 1.3 is kept)."""
    names = [n.strip() for n in raw.split(",") if n.strip()]
    tls13 = [n for n in names if n.upper() in TLS13_SUITES]
    if tls13 and len({n.upper() for n in tls13}) < len(TLS13_SUITES):
        raise ConfigError(
            f"kafka.ssl.cipher.suites names {', '.join(tls13)} but not every TLS 1.3 suite: "
            "Python's ssl module cannot narrow TLS 1.3's suites. List all of "
            f"{', '.join(TLS13_SUITES)}, or none of them (TLS 1.2 only).")
    openssl = []
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    for name in names:
        if name.upper() in TLS13_SUITES:
            continue
        suite = IANA_TO_OPENSSL.get(name.upper(), name)
        try:
            probe.set_ciphers(suite)
        except ssl.SSLError:
            raise ConfigError(
                f"kafka.ssl.cipher.suites: {name!r} is not a cipher suite this Python's "
                f"OpenSSL offers; use Java's names for TLS 1.2 ({', '.join(IANA_TO_OPENSSL)}), "
                "OpenSSL's names, or TLS 1.3's.") from None
        openssl.append(suite)
    return (":".join(openssl) if openssl else None), bool(tls13)


def parse_tls(kafka: Mapping[str, str]) -> TlsSettings | None:
    """The TLS settings of ``kafka`` (``kafka.*`` options without their prefix); None when
    none of :data:`KEYS` is given (kafka-python's own context, same defaults). An empty
    list means the defaults, as in Java."""
    kafka = {k: v for k, v in kafka.items() if k in KEYS and (
        k == "ssl.protocol" or any(item.strip() for item in v.split(",")))}
    if not kafka:
        return None
    order = ["TLSv1.2", "TLSv1.3"]
    enabled = {_version("ssl.enabled.protocols", v)
               for v in kafka.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3").split(",")
               if v.strip()}
    cap = kafka.get("ssl.protocol", "TLSv1.3").strip()
    if cap.upper() != "TLS":
        enabled = {v for v in enabled if order.index(v) <= order.index(_version(
            "ssl.protocol", cap))}
    if not enabled:
        raise ConfigError(f"kafka.ssl.protocol={cap} is below every version in "
                          "kafka.ssl.enabled.protocols, so no version is left; raise it or "
                          "enable a lower version.")
    ciphers, tls13 = None, True
    if "ssl.cipher.suites" in kafka:
        ciphers, tls13 = _suites(kafka["ssl.cipher.suites"])
        if not tls13:
            enabled.discard("TLSv1.3")
        if ciphers is None:
            enabled.discard("TLSv1.2")
        if not enabled:
            raise ConfigError("kafka.ssl.cipher.suites names no suite of the versions "
                              "kafka.ssl.enabled.protocols and kafka.ssl.protocol allow; "
                              "add one (TLS 1.2's or all of TLS 1.3's).")
    versions = sorted(enabled, key=order.index)
    return TlsSettings(versions[0], versions[-1], ciphers)
