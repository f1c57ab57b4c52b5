"""Apicurio Registry 3.3.3 as a local process: a schema registry for development and tests.

Apicurio serves Confluent's REST API at ``/apis/ccompat/v7`` (what eoskafka's client
speaks; docs/formats.md lists where it differs from Confluent's registry). It is
a Quarkus application: ``quarkus-run.jar`` and its ``lib/``, fetched from Maven Central
once with ``mvn`` and extracted into ``$EOSKAFKA_CACHE/apicurio-registry-3.3.3/`` (default
``~/.cache/eoskafka``). It needs Java 21 or newer: the newest JDK found in ``$JAVA_HOME``,
on ``PATH`` or under ``/usr/lib/jvm`` is used.

Each :class:`ApicurioRegistry` runs in-memory (H2) storage, its HTTP and management ports
bound to 127.0.0.1, with lean JVM flags, in a process group of its own; readiness is the
ccompat API answering. Its global compatibility level is set to BACKWARD on start,
Confluent's default (Apicurio's is NONE). ``eoskafka registry`` runs one in the
foreground; the format tests start one per session.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from .apache_kafka.cluster import free_ports
from .apache_kafka.jars import LEAN_JVM_OPTIONS, cache_root
from .errors import EosKafkaError

VERSION = "3.3.3"
ARTIFACT = f"io.apicurio:apicurio-registry-app:{VERSION}:tar.gz:all"
MIN_JAVA = 21
#: Path of Confluent's API on the registry.
CCOMPAT = "/apis/ccompat/v7"
#: Start-up to a serving API, measured 2026-11-27 on 2 cores: 3.5-5 s at load 1-3, 8.5-10.6 s
#: at load 10-11 (14 s the first time, load 5, page cache cold); CI machines are not idle.
START_DEADLINE_S = 240.0
STOP_GRACE_S = 20.0
_MAVEN_TIMEOUT_S = 900
#: A small heap and connection pool: the tests register a few hundred schemas at most.
_JVM = (*LEAN_JVM_OPTIONS, "-Xms32m", "-Xmx256m")
_SETTINGS = {
    "apicurio.storage.kind": "sql",
    "apicurio.storage.sql.kind": "h2",  # in memory: jdbc:h2:mem:
    "apicurio.datasource.jdbc.initial-size": "2",
    "apicurio.datasource.jdbc.min-size": "2",
    "apicurio.datasource.jdbc.max-size": "16",
    "quarkus.http.host": "127.0.0.1",
    "quarkus.management.host": "127.0.0.1",
}


class RegistryUnavailableError(EosKafkaError):
    """The registry cannot be fetched or started here (no JDK 21+, no mvn, a failed start)."""

    condition = "EOSKAFKA_REGISTRY_UNAVAILABLE"


def tarball() -> Path:
    """The app's tar.gz in the local Maven repository, fetched with ``mvn`` if missing."""
    path = (Path.home() / ".m2" / "repository" / "io" / "apicurio" / "apicurio-registry-app"
            / VERSION / f"apicurio-registry-app-{VERSION}-all.tar.gz")
    if path.exists():
        return path
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RegistryUnavailableError(
            f"Apicurio Registry {VERSION} is fetched from Maven Central with `mvn`, which is "
            f"not on PATH: install Maven, or put {path.name} in {path.parent}")
    # -Dtransitive=false: the app's pom names a repository that cannot be reached, and the
    # tar.gz holds every jar it needs anyway.
    done = subprocess.run([mvn, "-q", "-B", "dependency:get", "-Dtransitive=false",
                           f"-Dartifact={ARTIFACT}"], capture_output=True, text=True,
                          timeout=_MAVEN_TIMEOUT_S)
    if done.returncode != 0 or not path.exists():
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise RegistryUnavailableError(
            f"fetching {ARTIFACT} with mvn failed (exit {done.returncode}); is Maven Central "
            f"reachable? Last lines:\n" + "\n".join(tail))
    return path


def registry_home() -> Path:
    """The extracted app (``quarkus-run.jar`` and ``lib/``), extracted once: a
    ``.complete`` file marks it, a file lock serialises concurrent sessions, and a failed
    extraction leaves nothing behind."""
    home = cache_root() / f"apicurio-registry-{VERSION}"
    if (home / ".complete").exists():
        return home
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f".{home.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (home / ".complete").exists():
            return home
        source = tarball()
        staging = home.with_name(home.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        with tarfile.open(source) as archive:
            archive.extractall(staging, filter="data")
        if not (staging / "quarkus-run.jar").exists():
            raise RegistryUnavailableError(f"{source} holds no quarkus-run.jar")
        shutil.rmtree(home, ignore_errors=True)
        staging.rename(home)
        (home / ".complete").write_text(f"Apicurio Registry {VERSION} from {source}\n")
    return home


def _major(version: str) -> int:
    parts = version.strip().strip('"').split(".")
    digits = re.match(r"\d+", parts[0])
    first = int(digits.group()) if digits else 0
    return int(parts[1]) if first == 1 and len(parts) > 1 else first  # 1.8 -> 8


def _java_version(home: Path) -> int | None:
    release = home / "release"
    if release.exists():
        for line in release.read_text(errors="replace").splitlines():
            if line.startswith("JAVA_VERSION="):
                return _major(line.split("=", 1)[1])
    return None


def find_java(minimum: int | None = None) -> str:
    """The ``java`` of the newest JDK >= ``minimum`` found in JAVA_HOME, on PATH or under
    /usr/lib/jvm; RegistryUnavailableError naming what was found and what to install."""
    minimum = MIN_JAVA if minimum is None else minimum
    homes: list[Path] = []
    if os.environ.get("JAVA_HOME"):
        homes.append(Path(os.environ["JAVA_HOME"]))
    on_path = shutil.which("java")
    if on_path:
        homes.append(Path(on_path).resolve().parent.parent)
    jvm = Path("/usr/lib/jvm")
    if jvm.is_dir():
        homes += sorted(p.resolve() for p in jvm.iterdir() if p.is_dir())
    found: dict[Path, int] = {}
    for home in homes:
        version = _java_version(home)
        if version is not None and (home / "bin" / "java").exists():
            found.setdefault(home, version)
    fit = [h for h, v in found.items() if v >= minimum]
    if not fit:
        seen = ", ".join(f"Java {v} ({h})" for h, v in found.items()) or "no JDK"
        raise RegistryUnavailableError(
            f"Apicurio Registry {VERSION} (`eoskafka registry`, the format tests) needs "
            f"Java {minimum} or newer; found {seen}. Install a JDK {minimum}+ (Debian 12: "
            f"temurin-21-jdk or temurin-25-jdk from packages.adoptium.net; Ubuntu 24.04: "
            f"openjdk-21-jdk-headless) under /usr/lib/jvm, or point JAVA_HOME at one")
    best = max(fit, key=lambda h: found[h])
    return str(best / "bin" / "java")


def _parent_death_signal() -> Callable[[], None] | None:
    """Linux's PR_SET_PDEATHSIG (SIGTERM), for a child started in a new session: a signal to
    our process group does not reach it, and our death by SIGKILL must not leave it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None

    def arm() -> None:
        libc.prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG

    return arm


class ApicurioRegistry:
    """One Apicurio Registry process; ``with`` starts and stops it. ``url`` is the base of
    Confluent's API (``http://127.0.0.1:PORT/apis/ccompat/v7``); ``settings`` are Quarkus
    and Apicurio properties over the defaults here."""

    def __init__(self, *, log_dir: Path | None = None,
                 settings: Mapping[str, str] | None = None, port: int | None = None,
                 die_with_parent: bool = False) -> None:
        self.java = find_java()
        self.home = registry_home()
        self.settings = {**_SETTINGS, **(settings or {})}
        self.port, self.management_port = free_ports(2)
        if port is not None:
            self.port = port
        #: the JVM gets SIGTERM when the process that started it dies, even by SIGKILL
        self.die_with_parent = die_with_parent
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="eoskafka-apicurio-"))
        self.log_path = self.log_dir / "apicurio.log"
        self.started_in_s: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{CCOMPAT}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> ApicurioRegistry:
        settings = {**self.settings, "quarkus.http.port": str(self.port),
                    "quarkus.management.port": str(self.management_port)}
        command = [self.java, *_JVM, *(f"-D{k}={v}" for k, v in settings.items()),
                   "-jar", str(self.home / "quarkus-run.jar")]
        started = time.monotonic()
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(command, cwd=self.log_dir, stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True,
                                          preexec_fn=_parent_death_signal()
                                          if self.die_with_parent else None)
        try:
            self._await_ready(started + START_DEADLINE_S)
            self.started_in_s = time.monotonic() - started
            # Confluent's registry checks BACKWARD unless told otherwise; Apicurio's default
            # is NONE, and its compatibility endpoint answers false under it.
            self.set_compatibility("BACKWARD")
        except BaseException:
            self.stop()
            raise
        return self

    def _await_ready(self, deadline: float) -> None:
        """Poll the ccompat API until it answers 200: the registry is serving."""
        assert self._proc is not None
        pause = 0.05
        while True:
            if self._proc.poll() is not None:
                raise RegistryUnavailableError(
                    f"Apicurio Registry exited with {self._proc.returncode} while starting; "
                    f"its log ({self.log_path}) ends:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/subjects", timeout=5) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RegistryUnavailableError(
                    f"Apicurio Registry did not answer {self.url}/subjects within "
                    f"{START_DEADLINE_S:.0f} s; its log ({self.log_path}) ends:\n"
                    f"{self.log_tail()}")
            time.sleep(pause)  # polling a process we do not control, under a deadline
            pause = min(pause * 2, 0.5)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def set_compatibility(self, level: str, subject: str | None = None) -> None:
        """PUT /config (the global level) or /config/{subject}."""
        path = "/config" if subject is None else f"/config/{urllib.parse.quote(subject, safe='')}"
        self.call("PUT", path, {"compatibility": level})

    def call(self, method: str, path: str, body: object = None) -> object:
        """One request to the ccompat API (for test set-up, not the code under test)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Content-Type": "application/vnd.schemaregistry.v1+json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after a grace period."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> ApicurioRegistry:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
