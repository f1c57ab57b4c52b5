"""An Apache Kafka broker that signs clients in with Kerberos (SASL/GSSAPI), and the MIT
KDC it trusts (tests/kdc.py), for the Kerberos tests; one of each per session.

The node (the session's Kafka version) has, beside PLAINTEXT (the tests' admin:
``ANONYMOUS`` is a super user):

============  ===============  =============================================================
listener      protocol         what it does
============  ===============  =============================================================
``KERBEROS``  SASL_PLAINTEXT   GSSAPI as ``kafka/localhost@EOSKAFKA.TEST`` (its keytab),
                               service name ``kafka``; SCRAM-SHA-512 for delegation tokens
``KRB_TLS``   SASL_SSL         the same GSSAPI sign-in inside TLS (a test CA's certificate
                               for 127.0.0.1, tests/kafka_security.py)
============  ===============  =============================================================

Kafka's StandardAuthorizer with ``allow.everyone.if.no.acl.found=false`` and the ACLs of
docs/acls.md for the users of tests/broker/test_acls.py, each a Kerberos principal of the
same name with its own keytab (Kafka's default principal-to-local rules make
``full@EOSKAFKA.TEST`` the Kafka user ``User:full``). :data:`CLIENT` is a super user: the
exactly-once and delegation token tests; :data:`SHORT` gets tickets that expire within
seconds. Other principals, for the refusals: :data:`STALE`
(its keytab holds an old key: the principal was re-keyed after it was written),
:data:`GONE` (deleted from the KDC after its keytab was written) and :data:`ELSEWHERE`
(a keytab of another principal).

The JVM reads the KDC's ``krb5.conf`` from ``-Djava.security.krb5.conf``; the Python
clients from ``kafka.sasl.kerberos.krb5.conf`` in their options. Brokers advertise
``127.0.0.1``: MIT's client turns that into ``localhost`` (reverse lookup, as Java's does),
the host of the broker's principal.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eos_kafka_source.apache_kafka import KafkaTools, ListenerSpec
from tests.broker import test_acls as matrix
from tests.kafka_clusters import kafka_for_tests
from tests.kafka_security import make_certificates
from tests.kdc import Kdc, krb5_conf

KRB5 = "com.sun.security.auth.module.Krb5LoginModule"
SERVICE = "kafka"
BROKER_PRINCIPAL = "kafka/localhost"
CLIENT = "eosclient"
STALE, GONE, ELSEWHERE = "stale", "gone", "elsewhere"
#: A principal whose tickets live :data:`SHORT_TICKET_S` seconds (its maxlife).
SHORT, SHORT_TICKET_S = "shortlived", 3


def krb5_jaas(principal: str, keytab: Path | str, **more: str) -> str:
    pairs = {"useKeyTab": "true", "storeKey": "true", "keyTab": str(keytab),
             "principal": principal, **more}
    return f"{KRB5} required " + " ".join(f'{k}="{v}"' for k, v in pairs.items()) + ";"


@dataclass
class KerberosKafka(matrix.AclKafka):
    kdc: Kdc | None = None
    #: Kafka user (principal without realm) -> its keytab.
    keytabs: dict[str, Path] | None = None
    ca: Path | None = None  # KRB_TLS's CA (PEM)

    def options(self, user: str = CLIENT, keytab: Path | str | None = None,
                listener: str = "KERBEROS", **more: str) -> dict[str, str]:
        """``kafka.*`` options as a Spark job writes them for Kafka's Java client."""
        assert self.kdc is not None and self.keytabs is not None
        keytab = keytab if keytab is not None else self.keytabs[user]
        tls = ({"kafka.security.protocol": "SASL_SSL", "kafka.ssl.truststore.type": "PEM",
                "kafka.ssl.truststore.location": str(self.ca)} if listener == "KRB_TLS"
               else {"kafka.security.protocol": "SASL_PLAINTEXT"})
        return {"kafka.bootstrap.servers": self.cluster.listener_bootstrap(listener),
                **tls,
                "kafka.sasl.mechanism": "GSSAPI",
                "kafka.sasl.kerberos.service.name": SERVICE,
                "kafka.sasl.kerberos.krb5.conf": str(self.kdc.krb5_conf),
                "kafka.sasl.jaas.config": krb5_jaas(self.kdc.principal(user), keytab),
                **more}

    def unreachable_krb5_conf(self, port: int) -> Path:
        """A krb5.conf naming a KDC at 127.0.0.1:``port``, where none listens."""
        assert self.kdc is not None
        path = self.kdc.home / f"unreachable-{port}.conf"
        path.write_text(krb5_conf(self.kdc.realm, f"127.0.0.1:{port}"))
        return path


def _principals(kdc: Kdc) -> dict[str, Path]:
    keytabs = {user: kdc.add(user) for user in (CLIENT, *matrix.USERS)}
    keytabs[STALE] = kdc.add(STALE)
    kdc.kadmin(f"cpw -randkey {kdc.principal(STALE)}")  # its keytab now holds an old key
    keytabs[GONE] = kdc.add(GONE)
    kdc.kadmin(f"delprinc -force {kdc.principal(GONE)}")
    keytabs[ELSEWHERE] = keytabs[CLIENT]  # a keytab without the principal that names it
    keytabs[SHORT] = kdc.add(SHORT)
    kdc.kadmin(f'modprinc -maxlife "{SHORT_TICKET_S} seconds" {kdc.principal(SHORT)}')
    return keytabs


@pytest.fixture(scope="session")
def kerberos_kafka() -> Iterator[KerberosKafka]:
    """The KDC and node of this module's docstring (started once per session, on use)."""
    with Kdc() as kdc:
        broker_keytab = kdc.add(BROKER_PRINCIPAL)
        keytabs = _principals(kdc)
        kdc.kinit(CLIENT, keytabs[CLIENT])  # the KDC answers
        gssapi = {"sasl.enabled.mechanisms": "GSSAPI",
                  "gssapi.sasl.jaas.config": krb5_jaas(kdc.principal(BROKER_PRINCIPAL),
                                                       broker_keytab)}
        certs = make_certificates(kdc.home / "tls")
        listeners = [
            ListenerSpec("KERBEROS", "SASL_PLAINTEXT", {
                **gssapi, "sasl.enabled.mechanisms": "GSSAPI,SCRAM-SHA-512",
                "scram-sha-512.sasl.jaas.config":
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"}),
            ListenerSpec("KRB_TLS", "SASL_SSL", {
                **gssapi, "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(certs["server_keystore"])})]
        cluster = kafka_for_tests(
            1, listeners=listeners,
            extra={"sasl.kerberos.service.name": SERVICE,
                   "authorizer.class.name":
                       "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                   "super.users": f"User:ANONYMOUS;User:{CLIENT}",
                   "allow.everyone.if.no.acl.found": "false",
                   "delegation.token.secret.key": "eoskafka-kerberos-delegation-secret"},
            system_properties={"java.security.krb5.conf": str(kdc.krb5_conf)})
        with cluster:
            admin = cluster.bootstrap_servers
            matrix.prepare(admin)
            yield KerberosKafka(cluster, admin, kdc, keytabs, certs["ca"])
            assert KafkaTools(admin).open_transactions() == []

