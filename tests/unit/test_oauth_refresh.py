"""A failed OAUTHBEARER refresh keeps the valid cached token and backs off,
against the project's real OIDC token endpoint (tests/oidc_server.py), without Kafka.

Before: the first failed refresh raised at once (sign-in broken with a token still valid
for 19 s of 100), and every later sign-in asked the identity provider again, with no
backoff (one request per call). The clock is the test's: tokens are judged by
``time.time()``, which the server's ``exp`` claims follow too.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.wire.oauth import OAuthTokenError, TokenSource
from tests.oidc_server import OidcServer

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(time, "time", c)
    return c


@pytest.fixture
def oidc() -> Iterator[OidcServer]:
    with OidcServer() as server:
        server.add_client("app", "secret", lifetime_s=100)
        yield server


def _source(oidc: OidcServer, **options: str) -> TokenSource:
    config = ClientConfig.from_options({
        "kafka.bootstrap.servers": "b:9092", "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.oauthbearer.token.endpoint.url": oidc.token_url,
        "kafka.sasl.jaas.config": f'{MODULE} required clientId="app" clientSecret="secret";',
        **{f"kafka.{k}": v for k, v in options.items()}})
    assert config.oauth is not None
    return TokenSource(config.oauth)


def test_a_failed_refresh_keeps_the_valid_token_and_backs_off(
        oidc: OidcServer, clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    source = _source(oidc)
    start = clock.now
    first = source.token()
    oidc.fail(503)
    clock.now = start + 81  # past the refresh time (0.8 of 100 s), 19 s before expiry
    with caplog.at_level("WARNING", logger="eos_kafka_source.wire.oauth"):
        assert source.token() == first
    assert re.search(r"the cached token, valid for 1[89] s more", caplog.text), caplog.text
    assert "HTTP 503" in caplog.text
    asked = oidc.asked
    for _ in range(50):  # many sign-ins at once: the provider is not asked again
        assert source.token() == first
    assert oidc.asked == asked
    # 16 s of sign-ins every 50 ms: the backoff (100 ms doubling, at most 10 s) bounds the
    # requests to about seven, where there would have been 320.
    while clock.now < start + 97:
        clock.now += 0.05
        assert source.token() == first
    assert 5 <= oidc.asked - asked <= 9, oidc.asked - asked
    oidc.fail(None)
    clock.now += 10.5  # the longest backoff has passed: the next sign-in refreshes
    second = source.token()
    assert second != first and source.failures == 0


def test_sign_in_fails_once_the_token_expired_naming_the_providers_failure(
        oidc: OidcServer, clock: Clock) -> None:
    source = _source(oidc)
    start = clock.now
    source.token()
    oidc.fail(503)
    clock.now = start + 81
    source.token()  # kept
    clock.now = start + 100.5  # expired (under a second left is not handed out)
    with pytest.raises(OAuthTokenError) as err:
        source.token()
    message = str(err.value)
    assert "the cached OAUTHBEARER token expired" in message, message
    assert "HTTP 503" in message and oidc.token_url in message, message


def test_the_backoff_options_bound_the_requests(oidc: OidcServer, clock: Clock) -> None:
    """kafka.sasl.login.retry.backoff.ms=1000 and .max.ms=2000: after each failure the
    provider is not asked for 0.8 s at least (1 s less jitter), nor left for over 2 s."""
    source = _source(oidc, **{"sasl.login.retry.backoff.ms": "1000",
                              "sasl.login.retry.backoff.max.ms": "2000"})
    start = clock.now
    first = source.token()
    oidc.fail(500)
    asked_at: list[float] = []
    clock.now = start + 81
    while clock.now < start + 95:
        before = oidc.asked
        assert source.token() == first
        if oidc.asked > before:
            asked_at.append(clock.now)
        clock.now += 0.01
    gaps = [b - a for a, b in zip(asked_at, asked_at[1:], strict=False)]
    assert gaps and min(gaps) >= 0.8 - 0.02 and max(gaps) <= 2.0 + 0.02, gaps
    assert len(asked_at) <= 14 / 1.6 + 2, asked_at


def test_a_first_sign_in_whose_provider_fails_says_why_and_backs_off(
        oidc: OidcServer, clock: Clock) -> None:
    """No token yet: sign-in fails with the provider's own error, and the provider is
    not asked again before the backoff has passed."""
    oidc.fail(503)
    source = _source(oidc)
    with pytest.raises(OAuthTokenError, match="HTTP 503"):
        source.token()
    with pytest.raises(OAuthTokenError, match="HTTP 503"):
        source.token()
    assert oidc.asked == 1
