"""The ACL matrix of docs/acls.md for OAuth principals (tests/broker/test_acls.py does PLAIN).

The same roles, users and ACLs as test_acls.py, on a Kafka node with the StandardAuthorizer
whose only client listener is OAUTHBEARER, validating JWTs from the test identity
provider (tests/oidc_server.py) with Kafka's own validator: each user is an OIDC client
of the same name, and Kafka's principal is the token's ``sub`` claim (``User:<client id>``),
so the documented ACLs name it exactly as they name a PLAIN or SCRAM user.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient

from eos_kafka_source.apache_kafka import KafkaCluster, KafkaTools, ListenerSpec
from eos_kafka_source.client_config import ClientConfig
from eos_kafka_source.wire import KafkaWire, create_topic
from tests.broker import test_acls as matrix
from tests.brokers import KAFKA_VERSION
from tests.kafka_helpers import write_plain
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
            version=KAFKA_VERSION, listeners=[listener], ready_timeout_s=300,
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
            with KafkaWire(ClientConfig.from_options({"kafka.bootstrap.servers": admin})) as w:
                for user in matrix.USERS:
                    for suffix in (".in", ".out"):
                        create_topic(w, f"{user}{suffix}", 2)
            for user in matrix.USERS:
                write_plain(admin, f"{user}.in", [f"{user}-{i}".encode() for i in range(20)])
            client = KafkaAdminClient(bootstrap_servers=admin)
            try:
                acls = [n.acl("full") for n in matrix.NEEDS]
                acls += [m.acl(f"no-{n.key}") for n in matrix.NEEDS for m in matrix.NEEDS
                         if m is not n]
                assert not client.create_acls(acls)["failed"]
            finally:
                client.close()
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
    user = f"no-{need.key}"
    caplog.set_level(logging.WARNING, "eos_kafka_source")
    for role in need.roles:
        first = matrix.refused(acl_oauth_kafka, role, user, tmp_path / role, caplog)
        assert f"User:{user} may not " in first, (role, first)
        assert f"--allow-principal User:{user}" in first, (role, first)
        assert f"{matrix.FLAGS[need.kind]} {need.resource(user)}" in first, (role, first)
    assert matrix.open_producers(acl_oauth_kafka, f"{user}.out") == set()
