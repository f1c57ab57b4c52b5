"""Kerberos (SASL/GSSAPI) sign-in with a keytab, in every process that connects.

kafka-python's GSSAPI mechanism signs in with the process's default Kerberos credentials
(a ticket cache someone filled with ``kinit``). A Spark task has none, and should not
depend on one: here that mechanism is replaced by one that signs in as the principal of
``kafka.sasl.jaas.config`` with its keytab, as Java's ``Krb5LoginModule``
(``useKeyTab=true``) does. Initiator credentials are acquired from the keytab
(``gss_acquire_cred_from`` with ``client_keytab``) into an in-memory ticket cache private
to this process and login; MIT Kerberos gets a new ticket from the keytab whenever the
cached one has expired, so a query that runs for days never presents an expired one.

``krb5.conf``: ``kafka.sasl.kerberos.krb5.conf`` sets ``KRB5_CONFIG`` in this process
before any Kerberos call (MIT reads it for each new context), so the setting travels
with the query's options to the tasks; without it MIT reads ``KRB5_CONFIG`` or
``/etc/krb5.conf``. One process uses one krb5.conf: every login in it shares it.

kafka-python hands a SASL mechanism only its own settings, so the login is found by the
principal (``sasl_plain_username``, which ``ClientConfig.to_kafka_python`` sets to it)
among those :func:`use` registered in this process. Failures are :class:`KerberosError`
naming the option to fix. Runs on: the driver and the executors, wherever a connection
is made (wire/connection.py).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from typing import Any

from kafka.net.sasl import register_sasl_mechanism
from kafka.net.sasl.gssapi import SaslMechanismGSSAPI

from ..client.kerberos import JAAS, KRB5_CONF, SERVICE, KerberosSettings
from ..errors import AuthenticationError

INSTALL = ("install eoskafka with its [kerberos] extra (from a clone: pip install "
           "'.[kerberos]') in the Python of the driver and of every executor; it builds "
           "against MIT Kerberos' headers: apt-get install libkrb5-dev (Debian, Ubuntu) or "
           "dnf install krb5-devel (Fedora, RHEL) first")

#: MIT krb5 error codes (krb5_err.h, ERROR_TABLE_BASE_krb5 = -1765328384) as GSS minor
#: codes (unsigned 32-bit), by their offset in the table.
_BASE = 2**32 - 1765328384
_CLIENT_UNKNOWN, _SERVER_UNKNOWN, _PREAUTH_FAILED, _BAD_INTEGRITY, _SKEW = 6, 7, 24, 31, 37
_KDC_UNREACH, _REALM_UNKNOWN, _KT_NOTFOUND, _CC_NOTFOUND = 156, 154, 181, 195
_REALM_CANT_RESOLVE = 220

_MINOR = re.compile(r"Minor \(\d+\): (.+)$")

_LOGINS: dict[str, KerberosSettings] = {}
_LOCK = threading.Lock()


class KerberosError(AuthenticationError):
    """No Kerberos sign-in: gssapi missing, the keytab or principal wrong, the KDC or the
    broker's service principal not found."""


def _gssapi() -> Any:
    try:
        import gssapi
    except ImportError as exc:  # the package, or MIT's libgssapi_krb5 under it
        raise KerberosError(f"kafka.sasl.mechanism=GSSAPI needs the gssapi package, which "
                            f"this Python cannot import ({exc}): {INSTALL}.") from None
    return gssapi


def use(settings: KerberosSettings) -> None:
    """Make this process sign in as ``settings.principal`` with its keytab (kafka-python
    then calls :class:`KeytabGSSAPI` for each new connection and re-authentication)."""
    with _LOCK:
        _LOGINS[settings.principal] = settings


def _krb5_conf(settings: KerberosSettings) -> None:
    if settings.krb5_conf is None:
        return
    if not os.path.isfile(settings.krb5_conf):
        raise KerberosError(f"{KRB5_CONF}={settings.krb5_conf!r} is not a file on this host; "
                            "give the path of krb5.conf as every executor sees it.")
    os.environ["KRB5_CONFIG"] = settings.krb5_conf


def credentials(settings: KerberosSettings) -> Any:
    """Initiator credentials for ``settings.principal`` from its keytab, with a ticket
    from the KDC (asked now, so that a wrong keytab or an unreachable KDC fails here,
    naming the option to fix)."""
    _krb5_conf(settings)
    if not os.path.isfile(settings.keytab):
        raise KerberosError(f"{JAAS}: keyTab={settings.keytab!r} is not a file on this host "
                            f"(signing in as {settings.principal}); the keytab must be "
                            "readable at that path by the driver and every executor.")
    gssapi = _gssapi()
    cache = hashlib.sha256(repr(settings).encode()).hexdigest()[:16]
    try:
        name = gssapi.Name(settings.principal, gssapi.NameType.kerberos_principal)
        creds = gssapi.Credentials(name=name, usage="initiate", store={
            "client_keytab": settings.keytab, "ccache": f"MEMORY:eoskafka-{cache}"})
        creds.lifetime  # noqa: B018 -- asks the KDC if the cache holds no valid ticket
    except gssapi.exceptions.GSSError as exc:
        raise KerberosError(_explain(exc, settings)) from None
    return creds


def _explain(exc: Any, settings: KerberosSettings, target: str | None = None) -> str:
    """The message for a failed Kerberos step, by MIT's error code."""
    code = int(getattr(exc, "min_code", 0) or 0) - _BASE
    text = " ".join(str(exc).split())
    minor = _MINOR.search(text)  # MIT's own words; the GSS major code adds nothing
    said = minor.group(1) if minor else text
    who, conf = settings.principal, settings.krb5_conf or os.environ.get(
        "KRB5_CONFIG", "/etc/krb5.conf")
    if code in (_KDC_UNREACH, _REALM_UNKNOWN, _REALM_CANT_RESOLVE):
        return (f"Kerberos: no KDC answered for the realm of {who} ({said}); check the "
                f"realm's kdc entries in {conf} ({KRB5_CONF}, else KRB5_CONFIG) and that the "
                "KDC is up and reachable from this host.")
    if code == _CLIENT_UNKNOWN:
        return (f"Kerberos: the KDC does not know the principal {who!r} ({said}); fix "
                f"principal in {JAAS} (its realm must be the KDC's).")
    if code in (_PREAUTH_FAILED, _BAD_INTEGRITY):
        return (f"Kerberos: the KDC refused the key of {who} in keyTab={settings.keytab!r} "
                f"({said}); the keytab is not this principal's current one (its key was "
                f"changed, e.g. by a later ktadd): export a new keytab and point keyTab in "
                f"{JAAS} at it.")
    if code in (_CC_NOTFOUND, _KT_NOTFOUND):
        return (f"Kerberos: keyTab={settings.keytab!r} holds no key for {who} ({said}); fix "
                f"principal or keyTab in {JAAS} (klist -kt KEYTAB lists its principals).")
    if code == _SERVER_UNKNOWN:
        return (f"Kerberos: the KDC does not know the broker's service principal "
                f"{target or '?'} ({said}); set {SERVICE} to the first part of the brokers' "
                "principal (kafka for kafka/HOST@REALM) and connect to the brokers by the "
                "host names in their principals (kafka.bootstrap.servers, and the brokers' "
                "advertised.listeners).")
    if code == _SKEW:
        return (f"Kerberos: this host's clock is too far from the KDC's ({said}); "
                "synchronise it (NTP).")
    return (f"Kerberos sign-in as {who} with keyTab={settings.keytab!r} failed ({said}); "
            f"check {JAAS}, {SERVICE} and {KRB5_CONF} (krb5.conf: {conf}).")


class KeytabGSSAPI(SaslMechanismGSSAPI):
    """kafka-python's GSSAPI exchange, with the keytab's credentials of the login
    :func:`use` registered for this connection's principal (kafka-python's own, with the
    default credentials, for any other)."""

    def __init__(self, **config: Any) -> None:
        with _LOCK:
            settings = _LOGINS.get(config.get("sasl_plain_username") or "")
        if settings is None:
            super().__init__(**config)
            return
        gssapi = _gssapi()
        creds = credentials(settings)
        self._is_done = False
        self._is_authenticated = False
        host = config.get("sasl_kerberos_domain_name") or config.get("host", "")
        self.auth_id = f"{settings.service_name}@{host}"
        target = self.auth_id
        try:
            self.gssapi_name = gssapi.Name(
                self.auth_id, name_type=gssapi.NameType.hostbased_service,
            ).canonicalize(gssapi.MechType.kerberos)
            target = str(self.gssapi_name)
            self._client_ctx = gssapi.SecurityContext(name=self.gssapi_name, usage="initiate",
                                                      creds=creds)
            self._next_token = self._client_ctx.step(None)
        except gssapi.exceptions.GSSError as exc:
            raise KerberosError(_explain(exc, settings, target)) from None


register_sasl_mechanism("GSSAPI", KeytabGSSAPI, overwrite=True)
