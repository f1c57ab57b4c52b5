"""An Apache Kafka broker that signs clients in with OAUTHBEARER (KIP-768) and delegation
tokens, and the identity provider it trusts (tests/oidc_server.py), for the sign-in tests.

The cluster (one node, the session's Kafka version) has, beside PLAINTEXT:

==============  ===============  ===========================================================
listener        protocol         what it does
==============  ===============  ===========================================================
``OAUTH``       SASL_PLAINTEXT   OAUTHBEARER, JWTs checked by Kafka's own
                                 ``OAuthBearerValidatorCallbackHandler`` against the
                                 provider's JWKS and :data:`AUDIENCE`; SCRAM-SHA-512 too
                                 (users, and delegation tokens: ``tokenauth``)
``REAUTH``      SASL_PLAINTEXT   the same, with ``connections.max.reauth.ms`` =
                                 :data:`REAUTH_MS`: open connections must re-authenticate
                                 (KIP-368) or the broker closes them
==============  ===============  ===========================================================

Delegation tokens live :data:`TOKEN_MAX_LIFETIME_MS` at most and expire unless renewed
within :data:`TOKEN_EXPIRY_MS`. Kafka 4.x fetches the JWKS only from URLs allowed by the
JVM system property ``org.apache.kafka.sasl.oauthbearer.allowed.urls``.

OIDC clients: :data:`APP` (tokens live :data:`APP_TOKEN_S`: they expire and are
refreshed during a test), :data:`EXPIRED` (tokens already expired when issued) and
:data:`OTHER_AUDIENCE` (tokens for another audience).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster, ListenerSpec
from tests.kafka_clusters import kafka_for_tests
from tests.oidc_server import AUDIENCE, ISSUER, OidcServer

APP, APP_SECRET, APP_TOKEN_S = "eoskafka-app", "app-Secret-4Yq9", 6
EXPIRED = "expired-client"
OTHER_AUDIENCE = "other-audience-client"
SCRAM_USER, SCRAM_PASSWORD = "dtadmin", "dt-Pw-8xLm"
REAUTH_MS = 3000
TOKEN_MAX_LIFETIME_MS = 60_000
TOKEN_EXPIRY_MS = 15_000
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def oauth_jaas(client_id: str, secret: str, scope: str | None = "kafka", **more: str) -> str:
    pairs = {"clientId": client_id, "clientSecret": secret, **({"scope": scope} if scope else {}),
             **more}
    return f"{OAUTH_MODULE} required " + " ".join(f'{k}="{v}"' for k, v in pairs.items()) + ";"


def _listener(name: str, extra: dict[str, str]) -> ListenerSpec:
    return ListenerSpec(name, "SASL_PLAINTEXT", {
        "sasl.enabled.mechanisms": "OAUTHBEARER,SCRAM-SHA-512",
        "oauthbearer.sasl.jaas.config": f"{OAUTH_MODULE} required ;",
        "oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        **extra,
    })


@dataclass(frozen=True)
class OAuthKafka:
    cluster: KafkaCluster
    oidc: OidcServer

    def options(self, listener: str = "OAUTH", client_id: str = APP,
                secret: str = APP_SECRET, **more: str) -> dict[str, str]:
        """``kafka.*`` options as a Spark job writes them for Kafka's Java client."""
        return {"kafka.bootstrap.servers": self.cluster.listener_bootstrap(listener),
                "kafka.security.protocol": "SASL_PLAINTEXT",
                "kafka.sasl.mechanism": "OAUTHBEARER",
                "kafka.sasl.oauthbearer.token.endpoint.url": self.oidc.token_url,
                "kafka.sasl.login.callback.handler.class": LOGIN_HANDLER,
                "kafka.sasl.jaas.config": oauth_jaas(client_id, secret),
                **more}

    def scram_options(self, user: str = SCRAM_USER, password: str = SCRAM_PASSWORD,
                      **more: str) -> dict[str, str]:
        return {"kafka.bootstrap.servers": self.cluster.listener_bootstrap("OAUTH"),
                "kafka.security.protocol": "SASL_PLAINTEXT",
                "kafka.sasl.mechanism": "SCRAM-SHA-512",
                "kafka.sasl.jaas.config":
                    "org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{user}" password="{password}";', **more}


@pytest.fixture(scope="session")
def oidc() -> Iterator[OidcServer]:
    with OidcServer() as server:
        server.add_client(APP, APP_SECRET, APP_TOKEN_S)
        server.add_client(EXPIRED, APP_SECRET, -120)
        server.add_client(OTHER_AUDIENCE, APP_SECRET, 300, audience="someone-else")
        yield server


@pytest.fixture(scope="session")
def oauth_kafka(oidc: OidcServer) -> Iterator[OAuthKafka]:
    """The cluster of this module's docstring (started once per session, on first use)."""
    cluster = kafka_for_tests(
        1,
        extra={"sasl.oauthbearer.jwks.endpoint.url": oidc.jwks_url,
               "sasl.oauthbearer.expected.audience": AUDIENCE,
               # Kafka 4.4's validator refuses to start without it (4.3 did not check iss)
               "sasl.oauthbearer.expected.issuer": ISSUER,
               "delegation.token.secret.key": "eoskafka-test-delegation-secret",
               "delegation.token.max.lifetime.ms": str(TOKEN_MAX_LIFETIME_MS),
               "delegation.token.expiry.time.ms": str(TOKEN_EXPIRY_MS),
               "delegation.token.expiry.check.interval.ms": "1000"},
        listeners=[_listener("OAUTH", {}),
                   _listener("REAUTH", {"oauthbearer.connections.max.reauth.ms":
                                        str(REAUTH_MS)})],
        scram_users=[("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD)],
        system_properties={"org.apache.kafka.sasl.oauthbearer.allowed.urls": oidc.jwks_url},
    )
    with cluster:
        yield OAuthKafka(cluster, oidc)
