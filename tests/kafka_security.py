"""Apache Kafka's own SASL and TLS listeners for the security tests, and their test CA.

The session's Kafka broker (``tests/conftest.py``) gets four client listeners beside
PLAINTEXT, all configured here:

========================  ================  =================================================
listener                  protocol          what a client needs
========================  ================  =================================================
``SASL_PLAINTEXT``        SASL_PLAINTEXT    PLAIN or SCRAM-SHA-512 as ``alice``
``SSL``                   SSL               the test CA (PEM)
``MTLS``                  SSL               the CA and a client certificate signed by it
``SASL_SSL``              SASL_SSL          the CA, then PLAIN, SCRAM-SHA-256 or -512
``TLS12``                 SSL               the CA; TLS 1.2 with one cipher suite only
                                            (:data:`TLS12_SUITE`): the TLS option tests
========================  ================  =================================================

PLAIN users live in the listener's JAAS line (``user_alice="..."``); SCRAM users are
written into the cluster metadata when the node is formatted (``scram_users``). The
certificates are PEM files made by the ``openssl`` CLI (:func:`make_certificates`);
Kafka reads its key and chain from one PEM file (``ssl.keystore.type=PEM``).

:data:`PASSWORD` holds a quote and a non-ASCII letter, so that reprs escape it and the
broker configuration must carry it exactly; :data:`CORE` survives every escaping, so
``CORE not in text`` finds the password in any spelling, or any part of it.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster, ListenerSpec
from eos_kafka_source.cli import main as cli_main
from eos_kafka_source.errors import EosKafkaError

USER = "alice"
CORE = "7f3KzQ9X"
PASSWORD = f"Pw'{CORE}s3cr3t-\u00e9"
WRONG = f"wrong-{PASSWORD}"
KEY_PASSWORD = f"Kp-{CORE}-key"  # the client key's (mutual TLS)
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: Listener name -> security protocol.
LISTENERS = {"SASL_PLAINTEXT": "SASL_PLAINTEXT", "SSL": "SSL", "MTLS": "SSL",
             "SASL_SSL": "SASL_SSL", "TLS12": "SSL"}
#: The one cipher suite the TLS12 listener accepts (Java's name).
TLS12_SUITE = "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"
#: SASL mechanisms each SASL listener enables (SCRAM-SHA-256 is left out of one on purpose).
ENABLED = {"SASL_PLAINTEXT": ("PLAIN", "SCRAM-SHA-512"), "SASL_SSL": MECHANISMS}
#: A refusal must come well within this (it takes milliseconds; the slack is for busy hosts).
FAST_S = 20.0


def assert_clean(*texts: object) -> None:
    """No text shows the password (or the wrong one, which contains it) or the key's."""
    for text in texts:
        blob = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
        assert CORE not in blob, f"secret leaked in: {blob[:500]}"


def assert_short_failure(exc: BaseException, started: float) -> None:
    """One of our errors, quick, with no chained traceback behind it, showing no secret."""
    assert isinstance(exc, EosKafkaError)
    assert time.monotonic() - started < FAST_S, f"took {time.monotonic() - started:.1f}s"
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)
    assert_clean(str(exc), repr(exc), exc.args)


def assert_logs_clean(caplog: pytest.LogCaptureFixture) -> None:
    assert caplog.records, "nothing was logged: the check would prove nothing"
    assert_clean(caplog.text, *(r.getMessage() for r in caplog.records))


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``eoskafka ARGV``: exit code, stdout, stderr, checked for tracebacks and secrets."""
    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert_clean(out, err)
    return code, out, err


def cli_args(options: Mapping[str, str]) -> list[str]:
    """``-b`` and ``--config`` arguments for ``kafka.*`` options."""
    args = ["-b", options["kafka.bootstrap.servers"]]
    for key, value in options.items():
        if key != "kafka.bootstrap.servers":
            args += ["--config", f"{key}={value}"]
    return args


def make_certificates(directory: Path, host: str = "127.0.0.1",
                      key_password: str = KEY_PASSWORD) -> dict[str, Path]:
    """PEM files made with the ``openssl`` CLI: a CA; a server certificate for ``host``
    and a client certificate, both signed by it (the client's key encrypted with
    ``key_password``); the server's key and certificate in one file (Kafka's PEM
    keystore); and an unrelated CA. Keys: ca, server_cert, server_key, server_keystore,
    client_cert, client_key, other_ca."""
    directory.mkdir(parents=True, exist_ok=True)
    p = {name: directory / f"{name}.pem" for name in (
        "ca", "ca_key", "server_cert", "server_key", "client_cert", "client_key",
        "other_ca", "other_ca_key")}
    san = f"IP:{host}" if host.replace(".", "").isdigit() else f"DNS:{host}"
    (directory / "server.ext").write_text(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n")
    (directory / "client.ext").write_text("basicConstraints=CA:FALSE\n"
                                          "extendedKeyUsage=clientAuth\n")

    def run(*args: str | Path) -> None:
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)

    for ca, key, name in (("ca", "ca_key", "eoskafka test CA"),
                          ("other_ca", "other_ca_key", "someone else's CA")):
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
            "-keyout", p[key], "-out", p[ca])
    for who, cn, key_args in (("server", host, ["-nodes"]),
                              ("client", USER, ["-passout", f"pass:{key_password}"])):
        csr = directory / f"{who}.csr"
        run("req", "-newkey", "rsa:2048", *key_args, "-subj", f"/CN={cn}",
            "-keyout", p[f"{who}_key"], "-out", csr)
        run("x509", "-req", "-in", csr, "-CA", p["ca"], "-CAkey", p["ca_key"],
            "-CAcreateserial", "-days", "2", "-extfile", directory / f"{who}.ext",
            "-out", p[f"{who}_cert"])
    keystore = directory / "server_keystore.pem"  # unencrypted PKCS#8 key, then the chain
    keystore.write_text(p["server_key"].read_text() + p["server_cert"].read_text())
    return {**{k: v for k, v in p.items() if not k.endswith("ca_key")},
            "server_keystore": keystore}


def jaas(mechanism: str, user: str, password: str) -> str:
    """A client's ``kafka.sasl.jaas.config`` line, as Java clients write it."""
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    return f'{module} required username="{user}" password="{password}";'


def listener_specs(certs: Mapping[str, Path]) -> list[ListenerSpec]:
    """The broker side of :data:`LISTENERS` (``listener.name.<name>.*`` settings)."""
    tls = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs["server_keystore"])}
    mutual = {**tls, "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
              "ssl.truststore.location": str(certs["ca"])}
    tls12 = {**tls, "ssl.enabled.protocols": "TLSv1.2", "ssl.cipher.suites": TLS12_SUITE}
    configs = {"SASL_PLAINTEXT": sasl("SASL_PLAINTEXT"), "SSL": tls, "MTLS": mutual,
               "SASL_SSL": {**tls, **sasl("SASL_SSL")}, "TLS12": tls12}
    return [ListenerSpec(name, LISTENERS[name], configs[name]) for name in LISTENERS]


def sasl(listener: str) -> dict[str, str]:
    """SASL settings of ``listener``: its :data:`ENABLED` mechanisms, each with its JAAS
    line (PLAIN's holds the users; SCRAM's users are in the cluster metadata)."""
    plain = ("org.apache.kafka.common.security.plain.PlainLoginModule "
             f'required user_{USER}="{PASSWORD}";')
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    return {"sasl.enabled.mechanisms": ",".join(ENABLED[listener]),
            **{f"{m.lower()}.sasl.jaas.config": plain if m == "PLAIN" else scram
               for m in ENABLED[listener]}}


def scram_users() -> list[tuple[str, str, str]]:
    return [(m, USER, PASSWORD) for m in MECHANISMS if m.startswith("SCRAM")]


@dataclass(frozen=True)
class SecureKafka:
    """The session broker's secured listeners, and the ``kafka.*`` options to reach them."""

    cluster: KafkaCluster
    certs: Mapping[str, Path]

    def bootstrap(self, listener: str) -> str:
        return self.cluster.listener_bootstrap(listener)

    def options(self, listener: str, mechanism: str | None = None, *, password: str = PASSWORD,
                ca: str = "ca", **more: str) -> dict[str, str]:
        """``kafka.*`` options as a Spark job writes them (Java client names) for
        ``listener``; ``mechanism`` for the SASL ones (default PLAIN), ``ca`` names the
        truststore among :attr:`certs`."""
        protocol = LISTENERS[listener]
        options = {"kafka.bootstrap.servers": self.bootstrap(listener),
                   "kafka.security.protocol": protocol,
                   "kafka.socket.connection.setup.timeout.ms": "60000"}
        if protocol.startswith("SASL"):
            mechanism = mechanism or "PLAIN"
            options["kafka.sasl.mechanism"] = mechanism
            options["kafka.sasl.jaas.config"] = jaas(mechanism, USER, password)
        if protocol.endswith("SSL"):
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.location"] = str(self.certs[ca])
        if listener == "MTLS":
            options["kafka.ssl.keystore.type"] = "PEM"
            options["kafka.ssl.keystore.location"] = str(self.certs["client_cert"])
            options["kafka.ssl.key.location"] = str(self.certs["client_key"])
            options["kafka.ssl.key.password"] = KEY_PASSWORD
        options.update(more)
        return options
