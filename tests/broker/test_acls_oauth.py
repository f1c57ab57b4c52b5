"""The ACL matrix of docs/acls.md for OAuth principals (tests/broker/test_acls.py does PLAIN).

The same roles, users and ACLs as test_acls.py, on a Kafka node with the StandardAuthorizer
whose only client listener is OAUTHBEARER, validating JWTs from the test identity
provider (tests/oidc_server.py) with Kafka's own validator: each user is an OIDC client
of the same name, and Kafka's principal is the token's ``sub`` claim (``User:<client id>``),
so the documented ACLs name it exactly as they name a PLAIN or SCRAM user.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster, KafkaTools, ListenerSpec
from tests.broker import test_acls as matrix
from tests.brokers import KAFKA_VERSION
from tests.oauth_kafka import LOGIN_HANDLER, OAUTH_MODULE, VALIDATOR, oauth_jaas
from tests.oidc_server import AUDIENCE, ISSUER, OidcServer

pytestmark = pytest.mark.kafka_only
SECRET = "acl-oauth-secret"


@dataclass
class OAuthAclKafka(matrix.AclKafka):
    token_url: str = ""

    def options(self, user: str) -> dict[str, str]:
        return {"kafka.bootstrap.servers": self.cluster.listener_bootstrap("OAUTH"),
                "kafka.security.protocol": "SASL_PLAINTEXT",
                "kafka.sasl.mechanism": "OAUTHBEARER",
                "kafka.sasl.oauthbearer.token.endpoint.url": self.token_url,
                "kafka.sasl.login.callback.handler.class": LOGIN_HANDLER,
                "kafka.sasl.jaas.config": oauth_jaas(user, SECRET)}


@pytest.fixture(scope="module")
def acl_oauth_kafka() -> Iterator[OAuthAclKafka]:
    with OidcServer() as oidc:
        for user in matrix.USERS:
            oidc.add_client(user, SECRET, 600)
        listener = ListenerSpec("OAUTH", "SASL_PLAINTEXT", {
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "oauthbearer.sasl.jaas.config": f"{OAUTH_MODULE} required ;",
            "oauthbearer.sasl.server.callback.handler.class": VALIDATOR})
        cluster = KafkaCluster(
            version=KAFKA_VERSION, listeners=[listener], ready_timeout_s=300, lean_jvm=True,
            broker_config={
                "authorizer.class.name":
                    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:ANONYMOUS", "allow.everyone.if.no.acl.found": "false",
                "sasl.oauthbearer.jwks.endpoint.url": oidc.jwks_url,
                "sasl.oauthbearer.expected.audience": AUDIENCE,
                "sasl.oauthbearer.expected.issuer": ISSUER},
            system_properties={"org.apache.kafka.sasl.oauthbearer.allowed.urls":
                               oidc.jwks_url})
        with cluster:
            admin = cluster.bootstrap_servers
            matrix.prepare(admin)
            yield OAuthAclKafka(cluster, admin, oidc.token_url)
            assert KafkaTools(admin).open_transactions() == []


@pytest.fixture(autouse=True)
def _capsys(capsys: pytest.CaptureFixture[str]) -> Iterator[None]:
    matrix._CAPSYS.append(capsys)
    yield
    matrix._CAPSYS.pop()


@pytest.mark.parametrize("role", list(matrix.ROLES))
def test_the_documented_acls_suffice(role: str, acl_oauth_kafka: OAuthAclKafka,
                                     tmp_path: Path) -> None:
    matrix.ROLES[role](acl_oauth_kafka, "full", tmp_path)


@pytest.mark.parametrize("need", matrix.NEEDS, ids=lambda n: n.key)
def test_each_missing_acl_fails_fast_naming_it(need: matrix.Need,
                                               acl_oauth_kafka: OAuthAclKafka, tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    matrix.refusals_name_the_user(acl_oauth_kafka, need, tmp_path, caplog)
