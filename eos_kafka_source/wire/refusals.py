"""Why a first connection failed for good, in words that name the fix.

A broker that refuses the SASL credentials (PLAIN, SCRAM, a delegation token, an OAuth
token, a Kerberos ticket) or the TLS handshake will refuse every retry too: the first
attempt's failure becomes an :class:`~eos_kafka_source.errors.AuthenticationError` saying
which setting to check. Anything else (None) is left to the connection's deadline.
"""

from __future__ import annotations

import re

import kafka.errors as kerrors

from ..client.config import ClientConfig
from ..errors import AuthenticationError
from .oauth import OAuthTokenError, describe_claims, token_provider
from .redact import redact

#: Texts of TLS handshake failures that retrying cannot fix.
_TLS_REFUSALS = ("CERTIFICATE_VERIFY_FAILED", "certificate verify failed", "WRONG_VERSION_NUMBER",
                 "mismatch", "doesn't match", "UNKNOWN_CA", "BAD_CERTIFICATE",
                 "CERTIFICATE_REQUIRED")
#: Texts of a handshake where client and broker share no TLS version or cipher suite.
_TLS_NO_COMMON = ("PROTOCOL_VERSION", "UNSUPPORTED_PROTOCOL", "NO_PROTOCOLS_AVAILABLE",
                  "HANDSHAKE_FAILURE", "NO_SHARED_CIPHER", "NO_CIPHERS_AVAILABLE",
                  "INSUFFICIENT_SECURITY")
#: Texts of failures to load this side's TLS files (missing, not PEM, wrong key password).
_TLS_FILE_ERRORS = ("PEM lib", "BAD_DECRYPT", "NO_START_LINE", "KEY_VALUES_MISMATCH",
                    "NO_CERTIFICATE_OR_CRL_FOUND", "No such file", "Is a directory",
                    "Permission denied")


def refusal(config: ClientConfig, exc: BaseException, in_sasl: bool) -> AuthenticationError | None:
    """The error for a first connection the broker refused for good (bad credentials,
    an untrusted certificate), or None when retrying may help."""
    servers = ",".join(config.bootstrap_servers)
    if isinstance(exc, OAuthTokenError):  # raised by the token source, inside kafka-python
        return exc
    if in_sasl and config.kerberos is not None:
        return _kerberos_refusal(exc, config, servers)
    if isinstance(exc, (kerrors.UnsupportedSaslMechanismError, kerrors.IllegalSaslStateError)):
        # Refused at SaslHandshake, before any credential was sent: Kafka answers 33 for
        # a mechanism the listener does not enable, 34 on a listener without SASL.
        return AuthenticationError(
            f"the listener at {servers} does not accept SASL {config.sasl_mechanism} "
            f"({describe(exc)}); check that kafka.security.protocol "
            f"({config.security_protocol}) is the protocol of this listener (a PLAINTEXT "
            "or SSL listener does no SASL) and that kafka.sasl.mechanism is one of the "
            "broker's sasl.enabled.mechanisms for it"
        )
    if in_sasl and config.oauth is not None:
        source = token_provider(config.oauth)
        said = f"; it answered {source.last_refusal}" if source.last_refusal else ""
        return AuthenticationError(
            f"the broker at {servers} refused the OAUTHBEARER token from "
            f"{config.oauth.source} ({describe(exc)}{said}; the token: "
            f"{describe_claims(source.current)}); check that the token's audience is the "
            "broker's sasl.oauthbearer.expected.audience (ask the identity provider for it, "
            "e.g. with scope in kafka.sasl.jaas.config), that its issuer and signing key "
            "are the ones the broker trusts (sasl.oauthbearer.jwks.endpoint.url), that it "
            "has not expired (this host's clock), and that the listener enables "
            "OAUTHBEARER"
        )
    if in_sasl and config.sasl_token_auth:
        return AuthenticationError(
            f"the broker at {servers} refused the delegation token "
            f"{config.sasl_username!r} (SASL {config.sasl_mechanism}, tokenauth; "
            f"{describe(exc)}); the token has expired (not renewed within the broker's "
            "delegation.token.expiry.time.ms, or past its delegation.token.max.lifetime.ms) "
            "or was never created there: obtain a new one on the driver and restart the "
            "query with it (docs/security.md#delegation-tokens); the listener must also "
            "enable this SCRAM mechanism"
        )
    if in_sasl:
        return AuthenticationError(
            f"the broker at {servers} refused SASL {config.sasl_mechanism} authentication "
            f"as user {config.sasl_username!r} ({describe(exc)}); check the user name and "
            "password in kafka.sasl.jaas.config (or kafka.sasl.username / "
            "kafka.sasl.password), that kafka.sasl.mechanism is enabled on the broker, "
            "and that the user exists there for that mechanism"
        )
    text = describe(exc)
    if not config.security_protocol.endswith("SSL"):
        return None
    if any(marker in text for marker in _TLS_FILE_ERRORS):
        return AuthenticationError(
            f"could not load the TLS files for {servers} ({text}); check that "
            "kafka.ssl.truststore.location (or kafka.ssl.ca.location), "
            "kafka.ssl.certificate.location and kafka.ssl.key.location name readable PEM "
            "files and that kafka.ssl.key.password decrypts the key"
        )
    if any(marker in text for marker in _TLS_NO_COMMON):
        return AuthenticationError(
            f"the TLS handshake with {servers} failed ({text}): the broker and this client "
            "share no TLS version or cipher suite; check kafka.ssl.enabled.protocols, "
            "kafka.ssl.protocol and kafka.ssl.cipher.suites against the listener's "
            "ssl.enabled.protocols and ssl.cipher.suites, and that this listener speaks TLS"
        )
    if any(marker in text for marker in _TLS_REFUSALS):
        return AuthenticationError(
            f"the TLS handshake with {servers} failed ({text}); check that "
            "kafka.ssl.truststore.location (or kafka.ssl.ca.location) is the PEM file of "
            "the CA that signed the broker's certificate, that the host in "
            "kafka.bootstrap.servers is one the certificate names (or set "
            "kafka.ssl.endpoint.identification.algorithm to ''), that this listener "
            "speaks TLS, and, if the broker requires client certificates, "
            "kafka.ssl.certificate.location and kafka.ssl.key.location"
        )
    return None


def _safe(exc: BaseException) -> str:
    """An exception's text, short, with any registered secret masked."""
    text = redact(str(exc)) or type(exc).__name__
    return text[:300]


def describe(exc: BaseException) -> str:
    """``Type: text`` of an exception, without the type names kafka-python repeats."""
    name, text = type(exc).__name__, _safe(exc)
    text = re.sub(r"\b(\w+): (?:\1: )+", r"\1: ", text)
    return text if name in text else f"{name}: {text}"


def _kerberos_refusal(exc: BaseException, config: ClientConfig,
                      servers: str) -> AuthenticationError:
    """A GSSAPI sign-in that failed: our own KerberosError (no ticket, from wire/kerberos.py)
    as it is, else the broker's refusal of the ticket."""
    from .kerberos import KerberosError

    if isinstance(exc, KerberosError):
        return exc
    krb = config.kerberos
    assert krb is not None
    return AuthenticationError(
        f"the broker at {servers} refused Kerberos (SASL GSSAPI) sign-in as {krb.principal} "
        f"({describe(exc)}); check that kafka.sasl.kerberos.service.name ({krb.service_name}) "
        "is the first part of the broker's principal and that the host in "
        "kafka.bootstrap.servers is the one in it, that the broker's keytab holds that "
        "principal's current key, and that the listener enables GSSAPI"
    )
