"""SASL/OAUTHBEARER against Apache Kafka's own JWT validator (KIP-768), configured the way
Kafka's Java client is, with tokens from a real OIDC token endpoint (tests/oauth_kafka.py).

Covered here, below Spark: each role's sign-in (sink task and commit, source planning and
task), tokens refreshed before they expire on new connections, kept connections through
the broker's forced re-authentication (KIP-368), a Python token provider, and the first
error of each way a sign-in goes wrong. The streaming query through both listeners is in
tests/spark/test_oauth_stream.py.
"""

from __future__ import annotations

import pickle
import time
from pathlib import Path

import pyarrow as pa
import pytest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.datasource import EosKafkaDataSource
from eos_kafka_source.errors import AuthenticationError, ConfigError
from eos_kafka_source.source.partition_reader import read_partition
from eos_kafka_source.source.partitions import KafkaInputPartition
from eos_kafka_source.source.schema import kafka_schema
from eos_kafka_source.wire import KafkaWire, create_topic, fetch_metadata
from eos_kafka_source.wire.kept import close_kept, kept_wire
from eos_kafka_source.wire.oauth import token_provider
from eos_kafka_source.wire.sessions import all_sessions_left_s, connections
from tests.broker.test_security_kafka import VALUE_SCHEMA
from tests.kafka_security import FAST_S
from tests.oauth_kafka import (
    APP,
    APP_SECRET,
    APP_TOKEN_S,
    EXPIRED,
    OTHER_AUDIENCE,
    REAUTH_MS,
    OAuthKafka,
)
from tests.oidc_server import OidcServer
from tests.sink_harness import spark_checkpoint

pytestmark = pytest.mark.kafka_only


def _write_and_read(options: dict[str, str], topic: str, checkpoint: Path,
                    values: list[bytes]) -> list[bytes]:
    """The sink's roles (driver prepare, pickled task, commit) then the source's (planning,
    pickled task), every one connecting through ``options``."""
    planner = EosKafkaDataSource({**options, "topic": topic,
                                  "checkpointLocation": spark_checkpoint(checkpoint)}
                                 ).streamWriter(VALUE_SCHEMA, False)
    handoff = pickle.loads(pickle.dumps(planner)).write(
        iter([pa.RecordBatch.from_pydict({"value": values})]))
    pickle.loads(pickle.dumps(planner)).commit([pickle.loads(pickle.dumps(handoff))], 0)
    reader = EosKafkaDataSource({**options, "subscribe": topic}).reader(kafka_schema(False))
    read: list[bytes] = []
    for part in reader.partitions():
        assert isinstance(part, KafkaInputPartition)
        for batch in read_partition(pickle.loads(pickle.dumps(part))):
            read += batch.column("value").to_pylist()
    return read


def _until(seconds_from_now: float) -> None:
    """Let ``seconds_from_now`` of wall time pass: what these tests exercise is tokens and
    sessions expiring with the clock, so time passing is the event waited for."""
    deadline = time.monotonic() + seconds_from_now
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.2))


def test_every_role_signs_in_with_oidc_client_credentials(oauth_kafka: OAuthKafka,
                                                          unique: str, tmp_path: Path) -> None:
    options = oauth_kafka.options()
    with KafkaWire(ClientConfig.from_options(options)) as wire:
        create_topic(wire, unique, 2)
    values = [f"v{i}".encode() for i in range(40)]
    assert sorted(_write_and_read(options, unique, tmp_path / "ckpt", values)) == sorted(values)
    assert oauth_kafka.oidc.issued[APP] >= 1
    text = repr(ClientConfig.from_options(options))
    assert APP_SECRET not in text and "***" in text


def test_new_connections_get_a_refreshed_token(oauth_kafka: OAuthKafka) -> None:
    """Tokens live APP_TOKEN_S; a connection made after 80% of that presents a new one, and
    the broker accepts it, several times over."""
    config = ClientConfig.from_options(oauth_kafka.options())
    source = token_provider(config.oauth)  # type: ignore[arg-type]
    seen = set()
    for _ in range(3):
        with KafkaWire(config) as wire:
            fetch_metadata(wire, [])
        seen.add(source.current)
        _until(APP_TOKEN_S * 0.85)
    assert len(seen) == 3, "each connection after the refresh time used a new token"


def test_kept_connections_survive_forced_reauthentication(oauth_kafka: OAuthKafka) -> None:
    """On a listener with connections.max.reauth.ms, a connection in use re-authenticates
    (kafka-python 3.0 does KIP-368) and a kept, idle one past its session is replaced."""
    config = ClientConfig.from_options(oauth_kafka.options("REAUTH"))
    close_kept()
    with kept_wire(config) as wire:
        fetch_metadata(wire, [])
        (left,) = all_sessions_left_s(wire.client)
        assert 0 < left <= REAUTH_MS / 1000  # the broker bounded the session
        reauthenticated = 0  # sign-ins of a connection that stayed open (KIP-368)
        seen = {node: (conn, conn._reauth.authenticated_at)
                for node, conn in connections(wire.client).items()}
        # In use, no request failing, until two re-authentications on open connections:
        # three sessions on an idle machine; a loaded one (CI on 2 cores, 2026-11-26) may
        # miss a session's end and reconnect instead, so up to ten sessions.
        deadline = time.monotonic() + 10 * REAUTH_MS / 1000
        while reauthenticated < 2 and time.monotonic() < deadline:
            fetch_metadata(wire, [])
            for node, conn in connections(wire.client).items():
                before = seen.get(node)
                if before and before[0] is conn and conn._reauth.authenticated_at > before[1]:
                    reauthenticated += 1
                seen[node] = (conn, conn._reauth.authenticated_at)
            _until(0.1)
        assert reauthenticated >= 2, "kafka-python re-authenticated open connections"
    _until(1.5 * REAUTH_MS / 1000)  # idle, unpolled, past its session end
    with kept_wire(config) as wire:
        fetch_metadata(wire, [])  # a new connection, not a request on an expired session
    close_kept()


def test_a_python_token_provider(oauth_kafka: OAuthKafka, monkeypatch: pytest.MonkeyPatch,
                                 unique: str, tmp_path: Path) -> None:
    """``kafka.sasl.oauthbearer.token.provider``: the shape AWS MSK IAM, Azure and GCP plug
    in with (docs/security.md), here fetching from the local identity provider."""
    monkeypatch.setenv("EOSKAFKA_TEST_OIDC_URL", oauth_kafka.oidc.token_url)
    options = {k: v for k, v in oauth_kafka.options().items()
               if k not in ("kafka.sasl.oauthbearer.token.endpoint.url",
                            "kafka.sasl.login.callback.handler.class",
                            "kafka.sasl.jaas.config")}
    options["kafka.sasl.oauthbearer.token.provider"] = "tests.oauth_providers:local_oidc_token"
    with KafkaWire(ClientConfig.from_options(options)) as wire:
        create_topic(wire, unique, 1)
    values = [b"a", b"b", b"c"]
    assert sorted(_write_and_read(options, unique, tmp_path / "c", values)) == values


# -- the first error of each way a sign-in goes wrong ------------------------------------------


def _first_error(options: dict[str, str]) -> str:
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as info, KafkaWire(
            ClientConfig.from_options(options)) as wire:
        fetch_metadata(wire, [])
    assert time.monotonic() - started < FAST_S
    exc = info.value
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)
    assert APP_SECRET not in str(exc)
    return str(exc)


def test_wrong_client_secret(oauth_kafka: OAuthKafka) -> None:
    text = _first_error(oauth_kafka.options(secret="not-the-secret"))
    assert "refused the client credentials" in text and "invalid_client" in text
    assert "clientSecret" in text and "kafka.sasl.jaas.config" in text


def test_expired_token(oauth_kafka: OAuthKafka) -> None:
    text = _first_error(oauth_kafka.options(client_id=EXPIRED))
    assert "has expired" in text and "kafka.sasl.oauthbearer.token.endpoint.url" in text
    assert "clock" in text


def test_token_for_another_audience(oauth_kafka: OAuthKafka) -> None:
    """Kafka's validator refuses it (``invalid_token``); the message says which claims the
    token carried and which broker setting they must match."""
    text = _first_error(oauth_kafka.options(client_id=OTHER_AUDIENCE))
    assert "refused the OAUTHBEARER token" in text and "invalid_token" in text
    assert "aud='someone-else'" in text and "sasl.oauthbearer.expected.audience" in text
    assert "scope in kafka.sasl.jaas.config" in text


def test_unreachable_token_endpoint(oauth_kafka: OAuthKafka) -> None:
    from eos_kafka_source.apache_kafka.cluster import free_port

    url = f"http://127.0.0.1:{free_port()}/token"
    text = _first_error(oauth_kafka.options(
        **{"kafka.sasl.oauthbearer.token.endpoint.url": url}))
    assert "could not reach the token endpoint" in text and url in text
    assert "kafka.sasl.oauthbearer.token.endpoint.url" in text


def test_provider_returning_an_expired_token(oauth_kafka: OAuthKafka,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EOSKAFKA_TEST_OIDC_URL", oauth_kafka.oidc.token_url)
    options = {"kafka.bootstrap.servers": oauth_kafka.cluster.listener_bootstrap("OAUTH"),
               "kafka.security.protocol": "SASL_PLAINTEXT",
               "kafka.sasl.mechanism": "OAUTHBEARER",
               "kafka.sasl.oauthbearer.token.provider":
                   "tests.oauth_providers:expired_oidc_token"}
    text = _first_error(options)
    assert "has expired" in text and "kafka.sasl.oauthbearer.token.provider" in text


def test_a_java_login_handler_is_refused_by_name(oauth_kafka: OAuthKafka) -> None:
    options = oauth_kafka.options(**{
        "kafka.sasl.login.callback.handler.class": "com.example.MyHandler"})
    with pytest.raises(ConfigError, match="kafka.sasl.oauthbearer.token.provider"):
        ClientConfig.from_options(options)


def test_the_identity_provider_is_real(oidc: OidcServer) -> None:
    """The token endpoint checks the secret and the JWKS holds the signing key (so the
    broker's acceptance above proves a real signature check)."""
    token, lifetime = oidc.issue(APP)
    assert lifetime == APP_TOKEN_S and token.count(".") == 2
    assert oidc.jwks()["keys"][0]["kid"] == oidc.kid


def test_sign_in_keeps_the_cached_token_while_the_identity_provider_is_down(
        oauth_kafka: OAuthKafka) -> None:
    """The token endpoint fails from before the refresh time on. New
    connections still sign in with the cached token (Kafka accepts it: it is valid; the
    backoff's bound is tests/unit/test_oauth_refresh.py's); once the token has
    expired, sign-in fails naming the provider's failure. Before: the first connection
    after the refresh time failed with the endpoint's HTTP 503, the token still valid."""
    client, lifetime = "eoskafka-app-idp-down", 20
    oidc = oauth_kafka.oidc
    oidc.add_client(client, APP_SECRET, lifetime)
    config = ClientConfig.from_options(oauth_kafka.options(client_id=client))
    source = token_provider(config.oauth)  # type: ignore[arg-type]
    with KafkaWire(config) as wire:
        fetch_metadata(wire, [])
    first, expires_at = source.current, source.expires_at()
    oidc.fail(503)
    try:
        _until(lifetime * 0.85)  # past the refresh time (0.8), 3 s before expiry
        asked = oidc.asked
        for _ in range(4):
            with KafkaWire(config) as wire:
                fetch_metadata(wire, [])
        assert source.current == first and source.failures >= 1
        assert oidc.asked - asked == source.failures  # each one a failed refresh
        _until(expires_at - time.time() + 0.5)
        with pytest.raises(AuthenticationError) as info, KafkaWire(config) as wire:
            fetch_metadata(wire, [])
        text = str(info.value)
        assert "token expired" in text and "HTTP 503" in text, text
    finally:
        oidc.fail(None)
