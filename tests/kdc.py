"""A real MIT Kerberos KDC for the Kerberos (GSSAPI) tests: one realm, on a free loopback
port, in a temporary directory, for the session.

:class:`Kdc` writes ``kdc.conf`` and ``krb5.conf``, creates the database (``kdb5_util
create -s``), adds principals with random keys and writes their keytabs (``kadmin.local``),
then runs ``krb5kdc -n`` (in the foreground, as our child) until :meth:`Kdc.stop`. It is
ready when a client principal gets a ticket from it (:meth:`Kdc.kinit`): no sleeps.

MIT's binaries come from Debian's ``krb5-kdc`` and ``krb5-admin-server`` (``make
kerberos-deps``); they live in ``/usr/sbin``, which a non-root PATH may lack.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

REALM = "EOSKAFKA.TEST"
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
START_S = 30.0


def _tool(name: str) -> str:
    found = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), *_SBIN]))
    if found is None:
        raise RuntimeError(f"MIT Kerberos' {name} is not installed: run `make kerberos-deps` "
                           "(as root: apt-get install krb5-kdc krb5-admin-server libkrb5-dev)")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def krb5_conf(realm: str, kdc: str) -> str:
    """A client ``krb5.conf`` for ``realm`` served by ``kdc`` (host:port), over TCP (Java's
    client too: ``udp_preference_limit = 1``), with no DNS lookups of KDCs or realms."""
    return (f"[libdefaults]\n default_realm = {realm}\n dns_lookup_kdc = false\n"
            f" dns_lookup_realm = false\n udp_preference_limit = 1\n"
            f" kdc_timeout = 2000\n max_retries = 1\n"
            f"[realms]\n {realm} = {{\n  kdc = {kdc}\n }}\n"
            f"[domain_realm]\n localhost = {realm}\n")


class Kdc:
    """One realm's KDC; ``with Kdc() as kdc:`` starts and stops it."""

    def __init__(self, realm: str = REALM) -> None:
        self.realm = realm
        self.home = Path(tempfile.mkdtemp(prefix="eoskafka-kdc-"))
        self.port = free_port()
        self.krb5_conf = self.home / "krb5.conf"
        self._proc: subprocess.Popen[bytes] | None = None
        self._env = {**os.environ, "KRB5_CONFIG": str(self.krb5_conf),
                     "KRB5_KDC_PROFILE": str(self.home / "kdc.conf")}

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Kdc:
        home = self.home
        (home / "kdc.conf").write_text(
            f"[kdcdefaults]\n kdc_listen = 127.0.0.1:{self.port}\n"
            f" kdc_tcp_listen = 127.0.0.1:{self.port}\n"
            f"[realms]\n {self.realm} = {{\n  database_name = {home}/principal\n"
            f"  key_stash_file = {home}/stash\n  acl_file = {home}/kadm5.acl\n"
            f"  max_life = 1h\n  max_renewable_life = 1h\n"
            f"  supported_enctypes = aes256-cts-hmac-sha1-96:normal "
            f"aes128-cts-hmac-sha1-96:normal\n }}\n"
            f"[logging]\n kdc = FILE:{home}/kdc.log\n")
        self.krb5_conf.write_text(krb5_conf(self.realm, f"127.0.0.1:{self.port}"))
        self._run(_tool("kdb5_util"), "create", "-s", "-r", self.realm,
                  "-P", "eoskafka-test-master-key")
        self._proc = subprocess.Popen([_tool("krb5kdc"), "-n", "-r", self.realm],
                                      env=self._env, stdout=subprocess.DEVNULL,
                                      stderr=(home / "krb5kdc.out").open("wb"))
        return self

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> Kdc:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- principals ----------------------------------------------------------------------

    def principal(self, name: str) -> str:
        return name if "@" in name else f"{name}@{self.realm}"

    def add(self, *names: str, keytab: str | None = None) -> Path:
        """Principals with random keys, written to one keytab (``<first name>.keytab``)."""
        path = self.home / (keytab or names[0].replace("/", "_") + ".keytab")
        self.kadmin(*(f"addprinc -randkey {self.principal(n)}" for n in names),
                    *(f"ktadd -k {path} {self.principal(n)}" for n in names))
        return path

    def tickets_issued(self, principal: str) -> int:
        """How many initial tickets (TGTs) the KDC has issued to ``principal`` (its log)."""
        who = f"{self.principal(principal)} for krbtgt/"
        log = self.home / "kdc.log"
        text = log.read_text() if log.exists() else ""
        return sum(1 for line in text.splitlines() if "AS_REQ" in line and "ISSUE" in line
                   and who in line)

    def kadmin(self, *commands: str) -> str:
        """``kadmin.local`` commands, run in one process (its ``-q`` runs only the last)."""
        out = self._run(_tool("kadmin.local"), "-r", self.realm,
                        stdin="".join(f"{c}\n" for c in commands))
        if "error" in out.lower() or "does not exist" in out:
            raise RuntimeError(f"kadmin.local {commands}: {out[-2000:]}")
        return out

    def kinit(self, principal: str, keytab: Path, timeout_s: float = START_S) -> None:
        """Get a ticket as ``principal`` with ``keytab`` (into a private cache): the proof
        that the KDC answers. Retried until the KDC is up or ``timeout_s`` has passed."""
        deadline = time.monotonic() + timeout_s
        env = {**self._env, "KRB5CCNAME": f"FILE:{self.home}/kinit.ccache"}
        while True:
            done = subprocess.run([_tool("kinit"), "-k", "-t", str(keytab),
                                   self.principal(principal)],
                                  env=env, capture_output=True, text=True, timeout=30)
            if done.returncode == 0:
                return
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError("krb5kdc exited: "
                                   + (self.home / "krb5kdc.out").read_text()[-2000:])
            if time.monotonic() > deadline:
                raise RuntimeError(f"no ticket from the KDC within {timeout_s:.0f}s: "
                                   f"{done.stderr.strip()}")
            time.sleep(0.1)  # a retry's pause; each try asks the KDC itself

    def _run(self, *argv: str, stdin: str | None = None) -> str:
        done = subprocess.run(argv, env=self._env, input=stdin, capture_output=True,
                              text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed ({done.returncode}): "
                               f"{done.stdout[-1000:]}{done.stderr[-1000:]}")
        return done.stdout + done.stderr
