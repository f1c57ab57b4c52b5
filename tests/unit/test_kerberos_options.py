"""Kerberos (GSSAPI) options, as a Spark job writes them for Kafka's Java client, mapped onto
kafka-python's GSSAPI mechanism (eos_kafka_source/client/kerberos.py, wire/kerberos.py);
what cannot be honoured is refused by name. No KDC here: tests/broker/test_kerberos.py
signs in against a real one."""

from __future__ import annotations

import pickle
import sys

import pytest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.client.kerberos import KerberosSettings
from eos_kafka_source.errors import ConfigError

KRB5 = "com.sun.security.auth.module.Krb5LoginModule required"
KEYTAB_LINE = f'{KRB5} useKeyTab=true storeKey=true keyTab="/etc/kt/app.keytab" ' \
              'principal="app/worker1@EXAMPLE.COM";'
BASE = {"kafka.bootstrap.servers": "b1:9092", "kafka.security.protocol": "SASL_SSL"}
JAVA = {**BASE, "kafka.sasl.mechanism": "GSSAPI", "kafka.sasl.kerberos.service.name": "kafka",
        "kafka.sasl.jaas.config": KEYTAB_LINE}


def _error(options: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as info:
        ClientConfig.from_options(options)
    return str(info.value)


def test_java_options_map_onto_a_keytab_login() -> None:
    config = ClientConfig.from_options({**JAVA, "kafka.sasl.kerberos.krb5.conf": "/etc/k.conf"})
    assert config.sasl_mechanism == "GSSAPI" and config.security_protocol == "SASL_SSL"
    assert config.kerberos == KerberosSettings(
        principal="app/worker1@EXAMPLE.COM", keytab="/etc/kt/app.keytab",
        service_name="kafka", krb5_conf="/etc/k.conf")
    assert config.principal == "app"  # Kafka's User:app under its default rules
    assert pickle.loads(pickle.dumps(config)) == config  # travels to the executors
    kwargs = config.to_kafka_python()
    assert kwargs["sasl_mechanism"] == "GSSAPI"
    assert kwargs["sasl_kerberos_service_name"] == "kafka"
    assert kwargs["sasl_plain_username"] == "app/worker1@EXAMPLE.COM"  # finds the login
    assert "sasl_plain_password" not in kwargs
    assert "app.keytab" not in repr(config).split("kerberos=")[0]  # the JAAS line is hidden


def test_the_mechanism_follows_from_a_krb5_line_and_service_name_from_jaas() -> None:
    line = KEYTAB_LINE.replace("storeKey=true", 'serviceName="kafka-svc"')
    config = ClientConfig.from_options({**BASE, "kafka.sasl.jaas.config": line})
    assert config.sasl_mechanism == "GSSAPI"  # the Java client's default mechanism
    assert config.kerberos is not None and config.kerberos.service_name == "kafka-svc"
    assert config.kerberos.krb5_conf is None  # KRB5_CONFIG, else /etc/krb5.conf


@pytest.mark.parametrize("key", ["kafka.sasl.kerberos.kinit.cmd",
                                 "kafka.sasl.kerberos.ticket.renew.window.factor",
                                 "kafka.sasl.kerberos.min.time.before.relogin"])
def test_java_renewal_tuning_is_refused(key: str) -> None:
    """It would do nothing here (no login thread), so it is refused, saying why."""
    assert key in _error({**JAVA, key: "60000"}) and "no login thread" in _error({**JAVA, key: "1"})


@pytest.mark.parametrize(("change", "needles"), [
    ({"kafka.sasl.jaas.config": f"{KRB5} useTicketCache=true;"},
     ["useTicketCache=true is not supported", "ticket cache", "keytab", "delegation token"]),
    ({"kafka.sasl.jaas.config": KEYTAB_LINE.replace("storeKey=true", "useTicketCache=true")},
     ["useTicketCache=true is not supported"]),
    ({"kafka.sasl.jaas.config": KEYTAB_LINE.replace("storeKey=true", 'ticketCache="/tmp/c"')},
     ["ticketCache=/tmp/c is not supported"]),
    ({"kafka.sasl.jaas.config": KEYTAB_LINE.replace("storeKey=true", "renewTGT=true")},
     ["renewTGT=true is not supported"]),
    ({"kafka.sasl.jaas.config": KEYTAB_LINE.replace("storeKey=true", "useFirstPass=true")},
     ["useFirstPass=true is not supported"]),
    ({"kafka.sasl.jaas.config": KEYTAB_LINE.replace("storeKey=true", "isInitiator=false")},
     ["isInitiator=false"]),
    ({"kafka.sasl.jaas.config": KEYTAB_LINE.replace("storeKey=true", "storeKey=yes")},
     ["storeKey must be true or false"]),
    ({"kafka.sasl.jaas.config": KEYTAB_LINE.replace("storeKey=true", "keytab=x")},
     ["option 'keytab' is not known"]),
    ({"kafka.sasl.jaas.config": KEYTAB_LINE.replace("useKeyTab=true", "useKeyTab=false")},
     ["useKeyTab=true", "keyTab and principal"]),
    ({"kafka.sasl.jaas.config": f'{KRB5} useKeyTab=true principal="a@R";'},
     ["needs keyTab", "prompt"]),
    ({"kafka.sasl.jaas.config": f'{KRB5} useKeyTab=true keyTab="/k";'}, ["needs principal"]),
    ({"kafka.sasl.kerberos.service.name": None},
     ["kafka.sasl.kerberos.service.name is required", "=kafka"]),
    ({"kafka.sasl.kerberos.krb5.conf": " "}, ["kafka.sasl.kerberos.krb5.conf is empty"]),
    ({"kafka.sasl.jaas.config": None}, ["needs kafka.sasl.jaas.config", "Krb5LoginModule"]),
    ({"kafka.sasl.mechanism": "SCRAM-SHA-512"},
     ["kafka.sasl.kerberos.service.name is a GSSAPI", "kafka.sasl.mechanism=GSSAPI"]),
    ({"kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.kerberos.service.name": None},
     ["uses Krb5LoginModule but kafka.sasl.mechanism is SCRAM-SHA-512", "=GSSAPI"]),
    ({"kafka.sasl.username": "u", "kafka.sasl.password": "p"}, ["not for GSSAPI"]),
    ({"kafka.security.protocol": "SSL"}, ["SASL settings are given"]),
])
def test_what_cannot_be_honoured_is_refused_by_name(change: dict[str, str | None],
                                                     needles: list[str]) -> None:
    options = {**JAVA, **change}
    text = _error({k: v for k, v in options.items() if v is not None})
    for needle in needles:
        assert needle in text, (needle, text)


def test_without_gssapi_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path) -> None:  # noqa: ANN001
    from eos_kafka_source.wire.kerberos import KerberosError, credentials

    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi -> ImportError
    (tmp_path / "k").write_bytes(b"")
    settings = KerberosSettings("app@R", str(tmp_path / "k"), "kafka")
    with pytest.raises(KerberosError) as info:
        credentials(settings)
    text = str(info.value)
    assert "pip install '.[kerberos]'" in text and "libkrb5-dev" in text
    assert "executor" in text


def test_a_missing_krb5_conf_or_keytab_names_its_option(tmp_path) -> None:  # noqa: ANN001
    from eos_kafka_source.wire.kerberos import KerberosError, credentials

    settings = KerberosSettings("app@R", str(tmp_path / "k"), "kafka",
                                krb5_conf=str(tmp_path / "nope.conf"))
    with pytest.raises(KerberosError, match="kafka.sasl.kerberos.krb5.conf="):
        credentials(settings)
    settings = KerberosSettings("app@R", str(tmp_path / "k"), "kafka")
    with pytest.raises(KerberosError, match="kafka.sasl.jaas.config: keyTab="):
        credentials(settings)
