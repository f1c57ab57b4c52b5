"""Kafka delegation tokens, as Spark's connector uses them: the driver obtains one over its
own sign-in (OAUTHBEARER or SCRAM here), the query (its driver hooks and its tasks) signs
in with SCRAM as the token (``tokenauth``), and the driver renews it during a long query.
On the broker of tests/oauth_kafka.py: tokens expire TOKEN_EXPIRY_MS after their last
renewal and live TOKEN_MAX_LIFETIME_MS at most.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.errors import AuthenticationError
from eos_kafka_source.wire import KafkaWire, create_topic, fetch_metadata
from eos_kafka_source.wire.delegation import (
    DelegationTokenError,
    TokenRenewer,
    create_token,
    expire_token,
)
from tests.broker.test_oauth import _write_and_read
from tests.oauth_kafka import APP, TOKEN_EXPIRY_MS, TOKEN_MAX_LIFETIME_MS, OAuthKafka

pytestmark = pytest.mark.kafka_only


def _signs_in(options: dict[str, str]) -> None:
    with KafkaWire(ClientConfig.from_options(options)) as wire:
        fetch_metadata(wire, [])


@pytest.mark.parametrize("sign_in", ["oauth", "scram"])
def test_tasks_sign_in_as_the_drivers_token(oauth_kafka: OAuthKafka, unique: str,
                                            tmp_path: Path, sign_in: str) -> None:
    driver = oauth_kafka.options() if sign_in == "oauth" else oauth_kafka.scram_options()
    token = create_token(driver)
    assert token.owner == ("User:" + APP if sign_in == "oauth" else "User:dtadmin")
    tasks = token.task_options(driver)
    assert "clientSecret" not in tasks["kafka.sasl.jaas.config"]  # tasks hold no secret
    assert token.password not in repr(token)
    with KafkaWire(ClientConfig.from_options(driver)) as wire:
        create_topic(wire, unique, 2)
    values = [f"v{i}".encode() for i in range(20)]
    with TokenRenewer(driver, token):  # the token expires unless renewed (TOKEN_EXPIRY_MS)
        assert sorted(_write_and_read(tasks, unique, tmp_path / "c", values)) == sorted(values)
    expire_token(driver, token)


def test_renewed_during_a_long_query_then_refused_after_expiry(oauth_kafka: OAuthKafka) -> None:
    """Renewed by the driver, the token outlives delegation.token.expiry.time.ms; once it
    expires, a task's sign-in fails at once with a message saying what to do."""
    driver = oauth_kafka.options()
    token = create_token(driver)
    assert token.max_ms - token.issued_ms == TOKEN_MAX_LIFETIME_MS
    tasks = token.task_options(driver)
    with TokenRenewer(driver, token) as renewer:
        deadline = time.monotonic() + 1.5 * TOKEN_EXPIRY_MS / 1000
        while time.monotonic() < deadline:  # new task connections, past the first expiry
            _signs_in(tasks)
            time.sleep(1)
        assert renewer.renewals >= 2 and renewer.error is None
        assert renewer.expires_ms > token.expires_ms
    expire_token(driver, token)
    refused = None
    deadline = time.monotonic() + 30  # the broker's token cache drops it within moments
    while refused is None and time.monotonic() < deadline:
        try:
            _signs_in(tasks)
        except AuthenticationError as exc:
            refused = exc
    assert refused is not None, "the expired token still signs in"
    text = str(refused)
    assert "delegation token" in text and "obtain a new one" in text
    assert token.password not in text


def test_a_token_cannot_be_had_without_a_sign_in(oauth_kafka: OAuthKafka) -> None:
    plain = {"kafka.bootstrap.servers": oauth_kafka.cluster.bootstrap_servers}
    with pytest.raises(DelegationTokenError, match="SASL or TLS"):
        create_token(plain)
