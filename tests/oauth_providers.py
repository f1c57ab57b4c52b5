"""A ``kafka.sasl.oauthbearer.token.provider`` for the tests: the same shape as the AWS MSK
IAM, Azure and GCP providers in docs/security.md (a no-argument callable returning
``(token, expires_at)``), fetching from the local identity provider (tests/oidc_server.py)
named by ``EOSKAFKA_TEST_OIDC_URL``, as the cloud ones read their region or scope from
the environment. Importable on Spark's executors (the repo is on their path).
"""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.parse
import urllib.request

from tests.oauth_kafka import APP, APP_SECRET, EXPIRED


def local_oidc_token() -> tuple[str, float]:
    return _fetch(APP)


def expired_oidc_token() -> tuple[str, float]:
    """A token the identity provider issues already expired (client EXPIRED)."""
    return _fetch(EXPIRED)


def _fetch(client: str) -> tuple[str, float]:
    basic = base64.b64encode(f"{client}:{APP_SECRET}".encode()).decode()
    request = urllib.request.Request(
        os.environ["EOSKAFKA_TEST_OIDC_URL"], method="POST",
        data=urllib.parse.urlencode({"grant_type": "client_credentials"}).encode(),
        headers={"Authorization": f"Basic {basic}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        body = json.loads(answer.read())
    return body["access_token"], time.time() + body["expires_in"]
