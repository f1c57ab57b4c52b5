"""SASL/GSSAPI (Kerberos) options, read the way Kafka's Java client reads them.

A Spark user's options for ``format("kafka")`` on a Kerberos cluster work unchanged::

    kafka.security.protocol=SASL_SSL            (or SASL_PLAINTEXT)
    kafka.sasl.mechanism=GSSAPI
    kafka.sasl.kerberos.service.name=kafka
    kafka.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required
        useKeyTab=true keyTab="/etc/security/keytabs/app.keytab" principal="app@EXAMPLE.COM";

The keytab signs in every process that connects, the driver and each Spark task (so it
must be readable at that path on every executor), as Java's ``Krb5LoginModule`` does with
``useKeyTab=true``. Where Java reads ``krb5.conf`` from the JVM's
``-Djava.security.krb5.conf``, eoskafka reads ``kafka.sasl.kerberos.krb5.conf`` (its own
option, so that the setting travels with the query to the tasks), else MIT Kerberos' own
``KRB5_CONFIG`` variable, else ``/etc/krb5.conf``. Parsed on the driver into a frozen,
picklable :class:`KerberosSettings`; tickets are obtained where connections are made
(:mod:`eos_kafka_source.wire.kerberos`), never pickled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ConfigError

JAAS = "kafka.sasl.jaas.config"
SERVICE = "kafka.sasl.kerberos.service.name"
KRB5_CONF = "kafka.sasl.kerberos.krb5.conf"
JAAS_HELP = ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true '
             'keyTab="/path/to/app.keytab" principal="app@EXAMPLE.COM";')

#: GSSAPI settings parsed here (names without ``kafka.``).
KERBEROS_KEYS = frozenset({"sasl.kerberos.service.name", "sasl.kerberos.krb5.conf"})

_TICKET_CACHE = ("the tasks run in other processes, often on other hosts, which do not have "
                 "the driver's ticket cache (kinit's): sign in with a keytab every executor "
                 "can read (useKeyTab=true keyTab=\"...\" principal=\"...\"), or obtain a "
                 "delegation token on the driver (docs/security.md#delegation-tokens)")
#: Krb5LoginModule options eoskafka cannot honour, and why.
_REFUSED = {
    "useTicketCache": _TICKET_CACHE, "ticketCache": _TICKET_CACHE, "renewTGT": _TICKET_CACHE,
    "useFirstPass": "there is no password to share: sign in with a keytab",
    "tryFirstPass": "there is no password to share: sign in with a keytab",
    "storePass": "there is no password to share: sign in with a keytab",
    "clearPass": "there is no password to share: sign in with a keytab",
}
#: Krb5LoginModule options accepted without effect (what the JVM would do with them either
#: does not apply to a client, or MIT Kerberos does by itself; its tracing: KRB5_TRACE).
_IGNORED = frozenset({"storeKey", "doNotPrompt", "refreshKrb5Config", "debug",
                      "isInitiator"})
#: Read here (``serviceName``: when ``kafka.sasl.kerberos.service.name`` is not set, as Java).
_READ = frozenset({"useKeyTab", "keyTab", "principal", "serviceName"})
_FLAGS = frozenset({"useKeyTab", "useTicketCache", "renewTGT", "useFirstPass", "tryFirstPass",
                    "storePass", "clearPass"}) | _IGNORED


@dataclass(frozen=True)
class KerberosSettings:
    """Who signs in with which keytab, to which service; plain values, picklable.

    ``krb5_conf`` is ``kafka.sasl.kerberos.krb5.conf`` (None: ``KRB5_CONFIG`` or MIT's
    default, ``/etc/krb5.conf``). No secret here: the keytab is a file, named by its path.
    """

    principal: str
    keytab: str
    service_name: str
    krb5_conf: str | None = None

    @property
    def kafka_user(self) -> str:
        """The principal as Kafka names it with its default
        ``sasl.kerberos.principal.to.local.rules`` (``app/host@REALM`` -> ``app``), for
        messages and ACL hints; a broker with other rules names it otherwise."""
        return self.principal.split("@", 1)[0].split("/", 1)[0]


def parse_kerberos(kafka: Mapping[str, str], jaas_module: str | None,
                   jaas_pairs: Mapping[str, str]) -> KerberosSettings:
    """``kafka.*`` settings (without the prefix) of a GSSAPI login -> settings.

    ``jaas_module``/``jaas_pairs``: the parsed ``kafka.sasl.jaas.config``, if given.
    """
    if jaas_module is None:
        raise ConfigError(f"kafka.sasl.mechanism=GSSAPI needs {JAAS} with a keytab: write "
                          f"it as {JAAS_HELP}")
    if jaas_module != "Krb5LoginModule":
        raise ConfigError(f"{JAAS} uses {jaas_module} but kafka.sasl.mechanism is GSSAPI; "
                          f"write it as {JAAS_HELP}")
    for key, value in jaas_pairs.items():
        flag = value.strip().lower()
        if key not in _REFUSED and key not in _IGNORED and key not in _READ:
            raise ConfigError(f"{JAAS}: Krb5LoginModule option {key!r} is not known to "
                              f"eoskafka; remove it. Write the line as {JAAS_HELP}")
        if key in _FLAGS and flag not in ("true", "false"):
            raise ConfigError(f"{JAAS}: {key} must be true or false, got {value!r}.")
        if key in _REFUSED and (flag == "true" or key == "ticketCache"):
            raise ConfigError(f"{JAAS}: {key}={value} is not supported by eoskafka: "
                              f"{_REFUSED[key]}.")
        if key == "isInitiator" and flag == "false":
            raise ConfigError(f"{JAAS}: isInitiator=false would only accept sign-ins; a "
                              "Kafka client initiates them: remove it.")
    if jaas_pairs.get("useKeyTab", "false").strip().lower() != "true":
        raise ConfigError(f"{JAAS}: eoskafka signs in to Kerberos with a keytab only; set "
                          f"useKeyTab=true, keyTab and principal ({JAAS_HELP}). A ticket "
                          f"cache will not do: {_TICKET_CACHE}.")
    keytab, principal = (jaas_pairs.get(k, "").strip() for k in ("keyTab", "principal"))
    if not keytab or not principal:
        missing = " and ".join(k for k, v in (("keyTab", keytab), ("principal", principal))
                               if not v)
        raise ConfigError(f"{JAAS}: useKeyTab=true needs {missing} (Java's Krb5LoginModule "
                          f"would prompt for what is missing; a Spark task cannot). Write it "
                          f"as {JAAS_HELP}")
    service = kafka.get("sasl.kerberos.service.name", jaas_pairs.get("serviceName", "")).strip()
    if not service:  # Java's client refuses this too ("No serviceName defined")
        raise ConfigError(f"{SERVICE} is required with kafka.sasl.mechanism=GSSAPI: the "
                          f"first part of the brokers' Kerberos principal (kafka for "
                          f"kafka/broker-host@REALM); set {SERVICE}=kafka.")
    krb5_conf = kafka.get("sasl.kerberos.krb5.conf")
    if krb5_conf is not None and not krb5_conf.strip():
        raise ConfigError(f"{KRB5_CONF} is empty; give the path of krb5.conf, or remove it "
                          "(then KRB5_CONFIG, else /etc/krb5.conf, is read).")
    return KerberosSettings(principal=principal, keytab=keytab, service_name=service,
                            krb5_conf=krb5_conf.strip() if krb5_conf else None)
