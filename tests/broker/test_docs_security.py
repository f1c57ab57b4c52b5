"""The sign-in blocks of docs/security.md, run against Apache Kafka (tests/oauth_kafka.py).

Each block's text comes from the page (tests/doc_blocks.py), run with the capitalised
names set to the test broker's and identity provider's. The cloud providers' SDKs are
not installed: stand-ins with the same calls and return shapes (AWS's expiry in
milliseconds, Azure's ``AccessToken`` in seconds, google-auth's credentials) fetch their
tokens from the test's identity provider, so the snippets and eoskafka's contract for
providers are what is tested, not the clouds.
"""

from __future__ import annotations

import datetime
import sys
import types
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.wire import KafkaWire, create_topic
from eos_kafka_source.wire.delegation import expire_token
from eos_kafka_source.wire.oauth import TokenSource, jwt_claims
from tests.broker.test_oauth import _write_and_read
from tests.doc_blocks import block
from tests.kerberos_kafka import CLIENT, KerberosKafka
from tests.oauth_kafka import APP, APP_SECRET, SCRAM_PASSWORD, SCRAM_USER, OAuthKafka
from tests.oidc_server import OidcServer

pytestmark = pytest.mark.kafka_only
PAGE = "docs/security.md"


def _run(first_line: str, **names: Any) -> dict[str, Any]:
    namespace = dict(names)
    exec(compile(block(PAGE, first_line).text, f"{PAGE}: {first_line}", "exec"), namespace)
    return namespace


def _round_trip(options: dict[str, str], topic: str, tmp_path: Path) -> None:
    with KafkaWire(ClientConfig.from_options(options)) as wire:
        create_topic(wire, topic, 1)
    values = [b"one", b"two", b"three"]
    assert sorted(_write_and_read(options, topic, tmp_path / "c", values)) == sorted(values)


def _oauth_names(oauth_kafka: OAuthKafka) -> dict[str, str]:
    return {"BOOTSTRAP": oauth_kafka.cluster.listener_bootstrap("OAUTH"),
            "TOKEN_URL": oauth_kafka.oidc.token_url, "CLIENT_ID": APP,
            "CLIENT_SECRET": APP_SECRET}


def test_scram_block(oauth_kafka: OAuthKafka, unique: str, tmp_path: Path) -> None:
    ns = _run("scram = {", BOOTSTRAP=oauth_kafka.cluster.listener_bootstrap("OAUTH"),
              USER=SCRAM_USER, PASSWORD=SCRAM_PASSWORD)
    _round_trip(ns["scram"], unique, tmp_path)


def test_kerberos_block(kerberos_kafka: KerberosKafka, unique: str, tmp_path: Path) -> None:
    kdc = kerberos_kafka.kdc
    assert kdc is not None and kerberos_kafka.keytabs is not None
    ns = _run("kerberos = {", BOOTSTRAP=kerberos_kafka.cluster.listener_bootstrap("KERBEROS"),
              KEYTAB=str(kerberos_kafka.keytabs[CLIENT]), PRINCIPAL=kdc.principal(CLIENT),
              KRB5_CONF=str(kdc.krb5_conf))
    _round_trip(ns["kerberos"], unique, tmp_path)


def test_oauth_block(oauth_kafka: OAuthKafka, unique: str, tmp_path: Path) -> None:
    _round_trip(_run("oauth = {", **_oauth_names(oauth_kafka))["oauth"], unique, tmp_path)


def _local_token(oidc: OidcServer) -> tuple[str, float]:
    token, lifetime = oidc.issue(APP)
    return token, jwt_claims(token)["exp"]


def _stand_ins(oidc: OidcServer) -> dict[str, types.ModuleType]:
    """Modules named as the cloud SDKs, answering their documented calls locally."""
    aws = types.ModuleType("aws_msk_iam_sasl_signer")

    class MSKAuthTokenProvider:
        @staticmethod
        def generate_auth_token(region: str) -> tuple[str, int]:
            token, expires = _local_token(oidc)
            return token, int(expires * 1000)  # AWS answers milliseconds

    aws.MSKAuthTokenProvider = MSKAuthTokenProvider  # type: ignore[attr-defined]
    azure, identity = types.ModuleType("azure"), types.ModuleType("azure.identity")
    access_token = namedtuple("AccessToken", "token expires_on")

    class DefaultAzureCredential:
        def get_token(self, *scopes: str) -> Any:
            assert scopes[0].endswith("/.default")
            token, expires = _local_token(oidc)
            return access_token(token, int(expires))

    identity.DefaultAzureCredential = DefaultAzureCredential  # type: ignore[attr-defined]
    azure.identity = identity  # type: ignore[attr-defined]
    return {"aws_msk_iam_sasl_signer": aws, "azure": azure, "azure.identity": identity}


@pytest.mark.parametrize("cloud", ["AWS MSK IAM", "Azure Event Hubs"])
def test_cloud_providers(oauth_kafka: OAuthKafka, monkeypatch: pytest.MonkeyPatch,
                         unique: str, tmp_path: Path, cloud: str) -> None:
    for name, module in _stand_ins(oauth_kafka.oidc).items():
        monkeypatch.setitem(sys.modules, name, module)
    mytokens = types.ModuleType("mytokens")
    exec(block(PAGE, f"# mytokens.py ({cloud})").text, mytokens.__dict__)
    monkeypatch.setitem(sys.modules, "mytokens", mytokens)
    options = _run("provided = {", **_oauth_names(oauth_kafka))["provided"]
    if cloud != "AWS MSK IAM":
        options["kafka.sasl.oauthbearer.token.provider"] = "mytokens:event_hubs_token"
    _round_trip(options, unique, tmp_path)


def test_gcp_provider_envelope(oauth_kafka: OAuthKafka,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Google's envelope is for Google's brokers (the local one checks RS256 signatures),
    so here: its shape, and that eoskafka reads its expiry from it."""
    token, expires = _local_token(oauth_kafka.oidc)

    class Credentials:
        service_account_email = "writer@project.iam.gserviceaccount.com"
        token = expiry = None

        def refresh(self, request: object) -> None:
            self.token = token
            self.expiry = datetime.datetime.fromtimestamp(expires)

    google, auth = types.ModuleType("google"), types.ModuleType("google.auth")
    transport = types.ModuleType("google.auth.transport")
    requests = types.ModuleType("google.auth.transport.requests")
    requests.Request = object  # type: ignore[attr-defined]
    auth.default = lambda scopes: (Credentials(), "project")  # type: ignore[attr-defined]
    auth.transport, transport.requests = transport, requests  # type: ignore[attr-defined]
    google.auth = auth  # type: ignore[attr-defined]
    for name, module in {"google": google, "google.auth": auth,
                         "google.auth.transport": transport,
                         "google.auth.transport.requests": requests}.items():
        monkeypatch.setitem(sys.modules, name, module)
    mytokens = types.ModuleType("mytokens")
    exec(block(PAGE, "# mytokens.py (GCP)").text, mytokens.__dict__)
    monkeypatch.setitem(sys.modules, "mytokens", mytokens)
    config = ClientConfig.from_options({
        "kafka.bootstrap.servers": "127.0.0.1:1", "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.oauthbearer.token.provider": "mytokens:gcp_token"})
    assert config.oauth is not None
    source = TokenSource(config.oauth)
    envelope = source.token()
    assert jwt_claims(envelope)["sub"] == Credentials.service_account_email
    assert abs(source.expires_at() - expires) < 1


def test_delegation_block(oauth_kafka: OAuthKafka, unique: str, tmp_path: Path) -> None:
    oauth = _run("oauth = {", **_oauth_names(oauth_kafka))["oauth"]
    ns = _run("from eos_kafka_source.wire.delegation import TokenRenewer, create_token",
              oauth=oauth)
    for_tasks = ns["for_tasks"]
    with KafkaWire(ClientConfig.from_options(oauth)) as wire:
        create_topic(wire, unique, 1)
    values = [b"x", b"y"]
    try:
        assert sorted(_write_and_read(for_tasks, unique, tmp_path / "c", values)) == values
    finally:
        ns["renewer"].stop()
    expire_token(oauth, ns["token"])
