"""kafka.ssl.enabled.protocols, kafka.ssl.protocol, kafka.ssl.cipher.suites and
kafka.ssl.endpoint.identification.algorithm against Apache Kafka's own TLS listeners.

A user sets these to keep a connection off a TLS version or a cipher suite they do not
accept: a client that cannot agree with the broker must fail at the handshake, saying which
options to check, never connect with something the options excluded. The TLS12 listener
(tests/kafka_security.py) offers TLS 1.2 with one cipher suite only; SSL offers 1.2 and 1.3.
"""

from __future__ import annotations

import time

import pytest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.errors import AuthenticationError
from eos_kafka_source.wire import KafkaWire, fetch_metadata
from tests.kafka_security import TLS12_SUITE, SecureKafka, assert_short_failure

pytestmark = pytest.mark.kafka_only

OTHER_SUITE = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"  # TLS 1.2, not the TLS12 listener's


def connects(options: dict[str, str]) -> bool:
    with KafkaWire(ClientConfig.from_options(options)) as wire:
        return fetch_metadata(wire, []) is not None


def refused(options: dict[str, str], *needles: str) -> str:
    """The handshake fails at once, with an error naming ``needles``."""
    started = time.monotonic()
    with pytest.raises(AuthenticationError, match="TLS handshake") as info:
        connects(options)
    assert_short_failure(info.value, started)
    first = str(info.value).splitlines()[0]
    for needle in needles:
        assert needle in first, first
    return first


def test_a_protocol_the_broker_does_not_offer(secure_kafka: SecureKafka) -> None:
    """TLS 1.3 only against a TLS 1.2 listener: refused; 1.2 (or both) connects."""
    options = secure_kafka.options("TLS12")
    refused({**options, "kafka.ssl.enabled.protocols": "TLSv1.3"},
            "kafka.ssl.enabled.protocols", "kafka.ssl.cipher.suites")
    assert connects({**options, "kafka.ssl.enabled.protocols": "TLSv1.2,TLSv1.3"})
    assert connects({**options, "kafka.ssl.enabled.protocols": "TLSv1.2"})


def test_ssl_protocol_caps_the_version(secure_kafka: SecureKafka) -> None:
    """kafka.ssl.protocol=TLSv1.2 keeps the client off TLS 1.3 (as Java's client does):
    with TLS 1.3 suites only, no version is left that the broker takes."""
    options = secure_kafka.options("SSL", **{"kafka.ssl.protocol": "TLSv1.2"})
    assert connects(options)
    with pytest.raises(Exception, match="kafka.ssl.protocol"):
        ClientConfig.from_options({**options, "kafka.ssl.enabled.protocols": "TLSv1.3"})


def test_cipher_suites(secure_kafka: SecureKafka) -> None:
    """A suite the listener does not accept is refused at the handshake; the one it accepts
    (Java's name or OpenSSL's) connects."""
    options = secure_kafka.options("TLS12")
    refused({**options, "kafka.ssl.cipher.suites": OTHER_SUITE}, "kafka.ssl.cipher.suites")
    assert connects({**options, "kafka.ssl.cipher.suites": f"{OTHER_SUITE},{TLS12_SUITE}"})
    assert connects({**options, "kafka.ssl.cipher.suites": "ECDHE-RSA-AES256-GCM-SHA384"})


def test_host_name_check_with_tls_options(secure_kafka: SecureKafka) -> None:
    """With the TLS options set (eoskafka builds the TLS context itself) the host name is
    still checked: the certificate names 127.0.0.1, not localhost; '' turns the check off."""
    port = secure_kafka.bootstrap("SSL").rsplit(":", 1)[1]
    options = secure_kafka.options("SSL", **{"kafka.bootstrap.servers": f"localhost:{port}",
                                             "kafka.ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
                                             "kafka.ssl.cipher.suites": TLS12_SUITE})
    refused(options, "CERTIFICATE_VERIFY_FAILED", "kafka.ssl.endpoint.identification.algorithm")
    assert connects({**options, "kafka.ssl.endpoint.identification.algorithm": ""})


def test_a_missing_client_certificate_on_tls12(secure_kafka: SecureKafka) -> None:
    """With the versions narrowed to TLS 1.2 (eoskafka's own context) a broker that requires
    a client certificate refuses a client without one (bad_certificate), and the error
    names the certificate options; with them it connects."""
    good = secure_kafka.options("MTLS", **{"kafka.ssl.enabled.protocols": "TLSv1.2"})
    no_cert = {k: v for k, v in good.items()
               if not k.startswith(("kafka.ssl.keystore", "kafka.ssl.key."))}
    refused(no_cert, "kafka.ssl.certificate.location", "kafka.ssl.key.location")
    assert connects(good)
