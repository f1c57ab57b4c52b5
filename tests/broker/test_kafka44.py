"""Where Apache Kafka 4.4 differs from 4.3, as far as eoskafka can tell (docs/compatibility.md).

Compared on these machines (2026-11-25): the protocol message schemas in kafka-clients
4.3.1 and 4.4.0 differ only in ApiVersions v5 (KIP-1242: cluster and node id checks),
TxnOffsetCommit v6 (KIP-1319: topic ids instead of names), DeleteGroups v3 (an error
message per group) and the streams-group APIs; none of which eoskafka sends at the new
versions (kafka-python 3.0 speaks at most ApiVersions v4 and TxnOffsetCommit v5, which
4.4 still serves). The transaction, produce and fetch requests eoskafka uses are
unchanged, and test_sink_protocol, test_wire, test_security_kafka and test_acls pass on
both. What does differ for a user: 4.4's OAUTHBEARER validator will not start without
an expected issuer.
"""

from __future__ import annotations

import re

import pytest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import TxnOffsetCommitRequest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.errors import BrokerUnreachableError
from eos_kafka_source.wire import KafkaWire
from tests.brokers import KAFKA_VERSION
from tests.kafka_clusters import kafka_for_tests
from tests.oauth_kafka import OAUTH_MODULE, VALIDATOR
from tests.oidc_server import AUDIENCE, OidcServer

pytestmark = pytest.mark.kafka_only

#: Highest version the broker serves, per version of Kafka (None: the API is absent).
SERVED = {"4.4": {"ApiVersions": 5, "TxnOffsetCommit": 6, "DeleteGroups": 3, "EndTxn": 5},
          "4.3": {"ApiVersions": 4, "TxnOffsetCommit": 5, "DeleteGroups": 2, "EndTxn": 5}}
_KEYS = {"ApiVersions": 18, "TxnOffsetCommit": 28, "DeleteGroups": 42, "EndTxn": 26}


def test_the_versions_the_broker_serves(bootstrap: str) -> None:
    with KafkaWire(ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})) as wire:
        answer = wire.request(wire.any_node(), ApiVersionsRequest(
            version=3, client_software_name="eoskafka", client_software_version="0"),
            "ApiVersions")
        served = {k.api_key: k.max_version for k in answer.api_keys}
        if KAFKA_VERSION in SERVED:  # 3.9: only what eoskafka negotiates, below
            assert {name: served.get(key) for name, key in _KEYS.items()} == SERVED[
                KAFKA_VERSION]
        # kafka-python 3.0 speaks TxnOffsetCommit up to v5 (topic names, not ids) and
        # ApiVersions up to v4: it never asks 4.4 for the new versions
        assert TxnOffsetCommitRequest.valid_versions[1] == 5
        assert wire.client.api_version(TxnOffsetCommitRequest, max_version=5) == 5


def test_oauth_validator_needs_an_expected_issuer_on_44() -> None:
    """A broker validating JWTs with Kafka's own handler but no
    ``sasl.oauthbearer.expected.issuer``: 4.4 refuses to start, 4.3 and 3.9 start."""
    with OidcServer() as oidc:
        from eos_kafka_source.apache_kafka import ListenerSpec

        cluster = kafka_for_tests(
            1, extra={"sasl.oauthbearer.jwks.endpoint.url": oidc.jwks_url,
                      "sasl.oauthbearer.expected.audience": AUDIENCE},
            listeners=[ListenerSpec("OAUTH", "SASL_PLAINTEXT", {
                "sasl.enabled.mechanisms": "OAUTHBEARER",
                "oauthbearer.sasl.jaas.config": f"{OAUTH_MODULE} required ;",
                "oauthbearer.sasl.server.callback.handler.class": VALIDATOR})],
            system_properties={"org.apache.kafka.sasl.oauthbearer.allowed.urls":
                               oidc.jwks_url})
        if KAFKA_VERSION == "4.4":
            with pytest.raises(BrokerUnreachableError):
                cluster.start()
            log = cluster.log_paths[0].read_text()
            assert re.search(r'requires "sasl.oauthbearer.expected.issuer"', log)
        else:
            with cluster:
                pass
