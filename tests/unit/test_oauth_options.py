"""OAUTHBEARER, delegation-token and refused sign-in options, and the token cache's
refresh rule, without a broker (tests/broker/test_oauth.py has the real sign-ins)."""

from __future__ import annotations

import pickle
import time

import pytest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.errors import ConfigError
from eos_kafka_source.wire.oauth import OAuthTokenError, TokenSource, jwt_claims

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
BASE = {"kafka.bootstrap.servers": "b:9092", "kafka.security.protocol": "SASL_SSL"}
JAVA = {**BASE, "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        "kafka.sasl.login.callback.handler.class": HANDLER,
        "kafka.sasl.jaas.config": f'{MODULE} required clientId="app" clientSecret="S3cr3t-x" '
                                  'scope="kafka" extension_logicalCluster="lkc-1";'}


def _error(options: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as info:
        ClientConfig.from_options(options)
    return str(info.value)


def test_the_java_clients_options() -> None:
    config = ClientConfig.from_options(JAVA)
    oauth = config.oauth
    assert config.sasl_mechanism == "OAUTHBEARER" and oauth is not None
    assert (oauth.token_endpoint_url, oauth.client_id, oauth.client_secret, oauth.scope) == (
        "https://idp.example/token", "app", "S3cr3t-x", "kafka")
    assert oauth.extensions == (("logicalCluster", "lkc-1"),)
    assert config.principal == "app"
    assert "S3cr3t" not in repr(config) and "S3cr3t" not in str(oauth)
    assert pickle.loads(pickle.dumps(config)) == config
    hash(config)  # kept wires are keyed by it


def test_older_handler_name_and_mechanism_from_the_module() -> None:
    options = {**JAVA, "kafka.sasl.login.callback.handler.class":
               "org.apache.kafka.common.security.oauthbearer.secured."
               "OAuthBearerLoginCallbackHandler"}
    del options["kafka.sasl.mechanism"]
    assert ClientConfig.from_options(options).sasl_mechanism == "OAUTHBEARER"


def test_kip_1139_names_instead_of_the_jaas_line() -> None:
    options = {**JAVA, "kafka.sasl.oauthbearer.client.credentials.client.id": "app",
               "kafka.sasl.oauthbearer.client.credentials.client.secret": "s",
               "kafka.sasl.oauthbearer.scope": "kafka"}
    del options["kafka.sasl.jaas.config"]
    oauth = ClientConfig.from_options(options).oauth
    assert oauth is not None and (oauth.client_id, oauth.client_secret) == ("app", "s")


@pytest.mark.parametrize(("change", "needles"), [
    ({"kafka.sasl.login.callback.handler.class": "com.example.Handler"},
     ["com.example.Handler", "kafka.sasl.oauthbearer.token.provider"]),
    ({"kafka.sasl.oauthbearer.token.endpoint.url": None},
     ["needs a source of tokens", "kafka.sasl.oauthbearer.token.endpoint.url"]),
    ({"kafka.sasl.oauthbearer.token.provider": "m:f"}, ["both set"]),
    ({"kafka.sasl.oauthbearer.token.endpoint.url": "file:///tmp/t"}, ["not an http(s) URL"]),
    ({"kafka.sasl.jaas.config": f'{MODULE} required clientId="app";'},
     ["clientSecret", "kafka.sasl.jaas.config"]),
    ({"kafka.sasl.jaas.config": f'{MODULE} required unsecuredLoginStringClaim_sub="x";'},
     ["unsecured"]),
    ({"kafka.sasl.jaas.config": f'{MODULE} required clientId="a" clientSecret="b" foo="c";'},
     ["foo", "not supported"]),
    ({"kafka.sasl.mechanism": "PLAIN"}, ["OAUTHBEARER setting", "kafka.sasl.mechanism"]),
    ({"kafka.sasl.login.refresh.window.factor": "0.2"}, ["window.factor"]),
])
def test_refused_with_the_option_to_fix(change: dict[str, str | None],
                                        needles: list[str]) -> None:
    options = {**JAVA}
    for key, value in change.items():
        if value is None:
            options.pop(key)
        else:
            options[key] = value
    text = _error(options)
    assert all(n in text for n in needles), text
    assert "S3cr3t" not in text


def test_provider_option_shape() -> None:
    options = {**BASE, "kafka.sasl.mechanism": "OAUTHBEARER",
               "kafka.sasl.oauthbearer.token.provider": "not a callable"}
    assert "module:callable" in _error(options)


@pytest.mark.parametrize(("mechanism", "needle"), [
    ("AWS_MSK_IAM", "kafka.sasl.oauthbearer.token.provider")])
def test_unsupported_mechanisms_say_what_instead(mechanism: str, needle: str) -> None:
    text = _error({**BASE, "kafka.sasl.mechanism": mechanism})
    assert needle in text and "docs/security.md" in text


def test_delegation_token_jaas() -> None:
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="tokenid" password="aG1hYw==" tokenauth="true";')
    config = ClientConfig.from_options({**BASE, "kafka.sasl.mechanism": "SCRAM-SHA-512",
                                        "kafka.sasl.jaas.config": jaas})
    assert config.sasl_token_auth and config.sasl_username == "tokenid"
    plain = jaas.replace("scram.ScramLoginModule", "plain.PlainLoginModule")
    assert "tokenauth" in _error({**BASE, "kafka.sasl.mechanism": "PLAIN",
                                  "kafka.sasl.jaas.config": plain})


# -- the token cache ---------------------------------------------------------------------------

_ISSUED = [0]  # the provider's module is imported afresh by name: compare tokens only


def _issue(lifetime_s: float) -> tuple[str, float]:
    _ISSUED[0] += 1
    return f"token-{_ISSUED[0]}", time.time() + lifetime_s


def provider() -> tuple[str, float]:
    return _issue(100)


def provider_1000s() -> tuple[str, float]:
    return _issue(1000)


def expired_provider() -> tuple[str, float]:
    return "old", (time.time() - 5) * 1000  # milliseconds, as AWS's signer answers


def _source(name: str) -> TokenSource:
    config = ClientConfig.from_options({**BASE, "kafka.sasl.mechanism": "OAUTHBEARER",
                                        "kafka.sasl.oauthbearer.token.provider":
                                            f"tests.unit.test_oauth_options:{name}"})
    assert config.oauth is not None
    return TokenSource(config.oauth)


def test_a_token_is_cached_then_refreshed_at_the_window_factor(
        monkeypatch: pytest.MonkeyPatch) -> None:
    source = _source("provider")
    first = source.token()
    assert source.token() == first
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + 79)  # before 0.8 x 100 s
    assert source.token() == first
    monkeypatch.setattr(time, "time", lambda: now + 81)
    second = source.token()
    assert second != first and source.token() == second


def test_refresh_buffer_wins_when_nearer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1000 s token: 0.8 of it would leave 200 s, under the 300 s buffer, so it is
    refreshed 300 s before it expires (as Kafka's Java login refresh does)."""
    source = _source("provider_1000s")
    first = source.token()
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + 695)
    assert source.token() == first
    monkeypatch.setattr(time, "time", lambda: now + 705)
    assert source.token() != first


def test_an_expired_token_from_a_provider_milliseconds_recognised() -> None:
    with pytest.raises(OAuthTokenError, match="has expired"):
        _source("expired_provider").token()


def test_jwt_claims() -> None:
    assert jwt_claims("a.eyJleHAiOjEyM30.c") == {"exp": 123}
    assert jwt_claims("opaque-token") == {}
