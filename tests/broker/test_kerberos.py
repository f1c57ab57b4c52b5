"""Kerberos (SASL/GSSAPI) sign-in against Apache Kafka and a real MIT KDC
(tests/kerberos_kafka.py), configured the way Kafka's Java client is: a Krb5LoginModule
line with a keytab, ``kafka.sasl.kerberos.service.name``, and the KDC's krb5.conf in
``kafka.sasl.kerberos.krb5.conf``.

Covered here, below Spark: the sink's roles (driver and pickled tasks) exactly once and
the source reading it back, on SASL_PLAINTEXT and SASL_SSL; an expired ticket replaced
from the keytab; the first error of each way a sign-in goes wrong (an old keytab, a
principal the KDC does not know, a keytab without the principal, no keytab, no KDC, a
wrong service name); docs/acls.md's ACLs for Kerberos principals; a delegation token
obtained over Kerberos signing the tasks in. The streaming query through Spark is in
tests/spark/test_kerberos_stream.py.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.wire import KafkaWire, fetch_metadata
from eos_kafka_source.wire.delegation import TokenRenewer, create_token, expire_token
from eos_kafka_source.wire.kerberos import KerberosError
from tests.broker import test_acls as matrix
from tests.broker.test_oauth import _until, _write_and_read
from tests.kafka_helpers import create_topic
from tests.kafka_security import assert_short_failure
from tests.kdc import free_port
from tests.kerberos_kafka import (
    CLIENT,
    ELSEWHERE,
    GONE,
    SHORT,
    SHORT_TICKET_S,
    STALE,
    KerberosKafka,
)
from tests.sink_harness import Harness, assert_once_on_kafka, vals

pytestmark = pytest.mark.kafka_only


def test_sink_exactly_once_and_the_source_reads_it_back(kerberos_kafka: KerberosKafka,
                                                         unique: str, tmp_path: Path) -> None:
    """The driver (fencing, EndTxn) and the tasks sign in with the keytab; Kafka's own
    read_committed consumer and the marker oracle (PLAINTEXT) see each record once."""
    k = kerberos_kafka
    create_topic(k.admin, unique, partitions=2)
    sink = Harness(k.admin, unique, unique, tmp_path / "ckpt")
    sink.cfg = ClientConfig.from_options(k.options())  # every sink connection: GSSAPI
    sink.driver.prepare(new_run=True)
    handoffs = [sink.task(p, vals(f"krb-t{p}")) for p in range(2)]
    sink.driver.commit(0, handoffs, tasks=2)
    expected = Counter(vals("krb-t0") + vals("krb-t1"))
    assert_once_on_kafka(sink, expected)
    out = f"{unique}-read"
    create_topic(k.admin, out, partitions=2)  # the pickled roles of test_oauth, over GSSAPI
    read = _write_and_read(k.options(), out, tmp_path / "c2", sorted(expected))
    assert Counter(read) == expected


def test_sasl_ssl_signs_in_with_kerberos_inside_tls(kerberos_kafka: KerberosKafka,
                                                    unique: str, tmp_path: Path) -> None:
    """The same sign-in on a SASL_SSL listener: TLS checks the broker's certificate for
    127.0.0.1, Kerberos its principal kafka/localhost."""
    options = kerberos_kafka.options(listener="KRB_TLS")
    create_topic(kerberos_kafka.admin, unique, partitions=2)
    values = [f"tls{i}".encode() for i in range(20)]
    assert sorted(_write_and_read(options, unique, tmp_path / "c", values)) == sorted(values)


def test_an_expired_ticket_is_replaced_from_the_keytab(kerberos_kafka: KerberosKafka) -> None:
    """Tickets of SHORT live 3 s: a connection made after they expired signs in with a new
    one that this process got from the keytab (the KDC issued it), as a long query's
    tasks do day after day."""
    kdc, options = kerberos_kafka.kdc, kerberos_kafka.options(SHORT)
    assert kdc is not None
    with KafkaWire(ClientConfig.from_options(options)) as wire:
        fetch_metadata(wire, [])
    issued = kdc.tickets_issued(SHORT)
    assert issued >= 1
    _until(SHORT_TICKET_S + 1)  # the ticket's lifetime passing is what is tested
    with KafkaWire(ClientConfig.from_options(options)) as wire:
        fetch_metadata(wire, [])
    assert kdc.tickets_issued(SHORT) > issued


def _first_error(options: dict[str, str]) -> str:
    started = time.monotonic()
    with pytest.raises(KerberosError) as info:
        with KafkaWire(ClientConfig.from_options(options)) as wire:
            fetch_metadata(wire, [])
    assert_short_failure(info.value, started)
    return str(info.value).splitlines()[0]


@pytest.mark.parametrize(("case", "needles"), [
    ("old keytab", ["refused the key of stale@", "keyTab", "kafka.sasl.jaas.config"]),
    ("unknown principal", ["does not know the principal 'gone@", "principal in "
                           "kafka.sasl.jaas.config"]),
    ("keytab without the principal", ["holds no key for elsewhere@",
                                      "principal or keyTab in kafka.sasl.jaas.config"]),
    ("no keytab file", ["is not a file on this host", "kafka.sasl.jaas.config: keyTab="]),
    ("KDC unreachable", ["no KDC answered", "kafka.sasl.kerberos.krb5.conf"]),
    ("wrong service name", ["service principal kafkax/localhost@",
                            "kafka.sasl.kerberos.service.name"]),
])
def test_each_failed_sign_in_names_the_option_to_fix(kerberos_kafka: KerberosKafka,
                                                     tmp_path: Path, case: str,
                                                     needles: list[str]) -> None:
    k = kerberos_kafka
    options = {
        "old keytab": lambda: k.options(STALE),
        "unknown principal": lambda: k.options(GONE),
        "keytab without the principal": lambda: k.options(ELSEWHERE),
        "no keytab file": lambda: k.options(keytab=tmp_path / "missing.keytab"),
        "KDC unreachable": lambda: k.options(**{
            "kafka.sasl.kerberos.krb5.conf": str(k.unreachable_krb5_conf(free_port()))}),
        "wrong service name": lambda: k.options(
            **{"kafka.sasl.kerberos.service.name": "kafkax"}),
    }[case]()
    first = _first_error(options)
    assert "[EOSKAFKA_AUTHENTICATION_FAILED]" in first
    for needle in needles:
        assert needle in first, (case, first)
    # and the right login still works in the same process (its own ticket cache)
    with KafkaWire(ClientConfig.from_options(k.options(CLIENT))) as wire:
        fetch_metadata(wire, [])


@pytest.fixture
def _acl_capsys(capsys: pytest.CaptureFixture[str]):  # noqa: ANN202 - the matrix's CLI capture
    matrix._CAPSYS.append(capsys)
    yield
    matrix._CAPSYS.pop()


@pytest.mark.usefixtures("_acl_capsys")
@pytest.mark.parametrize("role", list(matrix.ROLES))
def test_the_documented_acls_suffice_for_a_kerberos_principal(
        role: str, kerberos_kafka: KerberosKafka, tmp_path: Path) -> None:
    matrix.ROLES[role](kerberos_kafka, "full", tmp_path)


@pytest.mark.usefixtures("_acl_capsys")
@pytest.mark.parametrize("need", matrix.NEEDS, ids=lambda n: n.key)
def test_each_missing_acl_names_the_kerberos_principal(
        need: matrix.Need, kerberos_kafka: KerberosKafka, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """``no-<acl>@EOSKAFKA.TEST`` is Kafka's ``User:no-<acl>`` (default principal-to-local
    rules): the refusal names that user, the resource and the kafka-acls line."""
    matrix.refusals_name_the_user(kerberos_kafka, need, tmp_path, caplog)


def test_a_delegation_token_obtained_over_kerberos_signs_the_tasks_in(
        kerberos_kafka: KerberosKafka, unique: str, tmp_path: Path) -> None:
    """Spark's connector on a Kerberos cluster: the driver, with the keytab, obtains a
    token; the tasks sign in with SCRAM as the token and hold no Kerberos setting."""
    driver = kerberos_kafka.options()
    token = create_token(driver)
    assert token.owner == f"User:{CLIENT}"
    tasks = token.task_options(driver)
    assert not any("kerberos" in k or "Krb5" in v for k, v in tasks.items())
    create_topic(kerberos_kafka.admin, unique, partitions=2)
    values = [f"dt{i}".encode() for i in range(20)]
    with TokenRenewer(driver, token):  # renewed over Kerberos
        assert sorted(_write_and_read(tasks, unique, tmp_path / "c", values)) == sorted(values)
    expire_token(driver, token)
