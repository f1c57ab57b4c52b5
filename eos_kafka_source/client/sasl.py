"""``kafka.sasl.*`` and the JAAS line -> who signs in, and how.

PLAIN and SCRAM (a user, or a delegation token with ``tokenauth="true"``), OAUTHBEARER
(:mod:`eos_kafka_source.client.oauth`) and GSSAPI (:mod:`eos_kafka_source.client.kerberos`),
each refused when its settings contradict each other or the security protocol, with the
fix in the message. Secrets are never shown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from eos_kafka_source.client.kerberos import KERBEROS_KEYS, KerberosSettings, parse_kerberos
from eos_kafka_source.client.oauth import OAUTH_KEYS, OAuthSettings, parse_oauth
from eos_kafka_source.errors import ConfigError

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
_MSK_IAM = ("kafka.sasl.mechanism=AWS_MSK_IAM is not supported as such; AWS's Python signer "
            "(aws-msk-iam-sasl-signer-python) signs in over OAUTHBEARER: set "
            "kafka.sasl.mechanism=OAUTHBEARER and kafka.sasl.oauthbearer.token.provider to a "
            "callable returning MSKAuthTokenProvider.generate_auth_token(region) "
            "(docs/security.md#aws-msk-iam).")

_JAAS = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*)", re.S)
_JAAS_PAIR = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')
_JAAS_HELP = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="USER" password="PASSWORD";')


@dataclass(frozen=True, repr=False)
class SaslSettings:
    """The sign-in part of a client configuration (no repr: it holds the password)."""

    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    #: SCRAM as a Kafka delegation token: the user name is the token id.
    token_auth: bool = False
    oauth: OAuthSettings | None = None
    kerberos: KerberosSettings | None = None


def parse_sasl(kafka: Mapping[str, str], protocol: str) -> SaslSettings:
    """The sign-in of ``kafka`` (``kafka.*`` options without their prefix) under
    ``protocol``, the security protocol already checked."""
    mechanism = kafka.get("sasl.mechanism")
    if mechanism is not None:
        mechanism = mechanism.strip().upper()
        if mechanism == "AWS_MSK_IAM":
            raise ConfigError(_MSK_IAM)
        if mechanism not in MECHANISMS:
            raise ConfigError(f"kafka.sasl.mechanism={mechanism!r} is not supported; "
                              f"use one of {', '.join(MECHANISMS)}.")

    username, password = kafka.get("sasl.username"), kafka.get("sasl.password")
    token_auth = "false"
    module, pairs = (_parse_jaas(kafka["sasl.jaas.config"]) if "sasl.jaas.config" in kafka
                     else (None, {}))
    oauth_keys = sorted(k for k in kafka if k in OAUTH_KEYS)
    oauth = kerberos = None
    if mechanism is None and module == "OAuthBearerLoginModule":
        mechanism = "OAUTHBEARER"
    if mechanism is None and module == "Krb5LoginModule":
        mechanism = "GSSAPI"  # the Java client's default mechanism
    kerberos_keys = sorted(k for k in kafka if k in KERBEROS_KEYS)
    if kerberos_keys and mechanism != "GSSAPI":
        raise ConfigError(f"kafka.{kerberos_keys[0]} is a GSSAPI (Kerberos) setting but "
                          f"kafka.sasl.mechanism is {mechanism}; set "
                          "kafka.sasl.mechanism=GSSAPI, or remove it.")
    if mechanism == "GSSAPI":
        if username is not None or password is not None or oauth_keys:
            raise ConfigError("kafka.sasl.username/kafka.sasl.password and the "
                              "kafka.sasl.oauthbearer.* settings are not for GSSAPI, "
                              "which signs in with a keytab: remove them.")
        kerberos = parse_kerberos(kafka, module, pairs)
        username = kerberos.principal
    elif mechanism == "OAUTHBEARER":
        if username is not None or password is not None:
            raise ConfigError("kafka.sasl.username/kafka.sasl.password are for PLAIN and "
                              "SCRAM; OAUTHBEARER signs in with a token: remove them.")
        oauth = parse_oauth(kafka, module, pairs)
    elif oauth_keys:
        raise ConfigError(f"kafka.{oauth_keys[0]} is an OAUTHBEARER setting but "
                          f"kafka.sasl.mechanism is {mechanism}; set "
                          "kafka.sasl.mechanism=OAUTHBEARER, or remove it.")
    elif module is not None:
        if username is not None or password is not None:
            raise ConfigError("kafka.sasl.jaas.config and kafka.sasl.username/"
                              "kafka.sasl.password are both set; keep one of the two.")
        if module in ("OAuthBearerLoginModule", "Krb5LoginModule"):
            fix = "OAUTHBEARER" if module == "OAuthBearerLoginModule" else "GSSAPI"
            raise ConfigError(f"kafka.sasl.jaas.config uses {module} but "
                              f"kafka.sasl.mechanism is {mechanism}; set "
                              f"kafka.sasl.mechanism={fix}.")
        username, password = _user_password(module, pairs)
        token_auth = pairs.get("tokenauth", "false").strip().lower()
        if token_auth not in ("true", "false") or (
                token_auth == "true" and module != "ScramLoginModule"):
            raise ConfigError('kafka.sasl.jaas.config: tokenauth="true" (sign in as a '
                              "delegation token) goes with ScramLoginModule and "
                              "kafka.sasl.mechanism SCRAM-SHA-256 or SCRAM-SHA-512.")
        if mechanism is None and module == "PlainLoginModule":
            mechanism = "PLAIN"
        if (module == "PlainLoginModule") != (mechanism == "PLAIN"):
            raise ConfigError(
                f"kafka.sasl.jaas.config uses {module} but kafka.sasl.mechanism is "
                f"{mechanism}; PlainLoginModule goes with PLAIN, ScramLoginModule "
                f"with SCRAM-SHA-256 or SCRAM-SHA-512: set kafka.sasl.mechanism."
            )
    elif (username is None) != (password is None):
        raise ConfigError("kafka.sasl.username and kafka.sasl.password must be set "
                          "together; one of them is missing.")
    if protocol.startswith("SASL_"):
        if username is None and oauth is None:
            raise ConfigError(f"kafka.security.protocol={protocol} needs credentials: set "
                              f"kafka.sasl.jaas.config (or kafka.sasl.username and "
                              f"kafka.sasl.password) and kafka.sasl.mechanism.")
        if mechanism is None:
            raise ConfigError(f"kafka.sasl.mechanism is required with "
                              f"kafka.security.protocol={protocol}; set one of "
                              f"{', '.join(MECHANISMS)}.")
    elif username is not None or mechanism is not None or oauth is not None:
        raise ConfigError(f"SASL settings are given but kafka.security.protocol is "
                          f"{protocol}, so they would be ignored; set "
                          f"kafka.security.protocol=SASL_SSL (or SASL_PLAINTEXT).")
    return SaslSettings(mechanism, username, password, token_auth == "true", oauth, kerberos)


def _parse_jaas(value: str) -> tuple[str, dict[str, str]]:
    """``(login module's class name, its options)`` from a JAAS line."""
    key = "kafka.sasl.jaas.config"
    bad = ConfigError(f"{key} could not be parsed (value hidden). Write it as {_JAAS_HELP}")
    m = _JAAS.fullmatch(value.strip())
    if not m:
        raise bad
    module, body, pos, pairs = m.group(1), m.group(3).strip(), 0, {}
    body = body[:-1] if body.endswith(";") else body
    while pos < len(body):
        pm = _JAAS_PAIR.match(body, pos)
        if not pm:
            raise bad
        raw = pm.group(2) if pm.group(2) is not None else pm.group(3)
        pairs[pm.group(1)] = re.sub(r"\\(.)", r"\1", raw)
        pos = pm.end()
        while pos < len(body) and body[pos].isspace():
            pos += 1
    kind = module.rsplit(".", 1)[-1]
    if kind not in ("PlainLoginModule", "ScramLoginModule", "OAuthBearerLoginModule",
                    "Krb5LoginModule"):
        raise ConfigError(
            f"{key} uses login module {kind}; eoskafka supports PlainLoginModule, "
            f"ScramLoginModule, OAuthBearerLoginModule and Krb5LoginModule (mechanisms "
            f"{', '.join(MECHANISMS)})."
        )
    return kind, pairs


def _user_password(kind: str, pairs: Mapping[str, str]) -> tuple[str, str]:
    """``(username, password)`` of a PLAIN or SCRAM JAAS line."""
    key = "kafka.sasl.jaas.config"
    if "username" not in pairs or "password" not in pairs:
        raise ConfigError(f"{key} must set both username and password. "
                          f"Write it as {_JAAS_HELP}")
    return pairs["username"], pairs["password"]
