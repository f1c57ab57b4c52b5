"""Connections and request dispatch over kafka-python's protocol layer.

Everything eoskafka sends to a broker goes through :class:`KafkaWire`: it owns
one ``kafka.net.compat.KafkaNetClient`` (which brings SASL/SSL and bootstrap),
sends requests pipelined, bounds every wait by a deadline, and turns client
exceptions into ours, naming the broker and the request. A dropped connection
is reported at once, never waited on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

import kafka.errors as kerrors
from kafka.net.compat import KafkaNetClient

from ..client_config import ClientConfig
from ..errors import BrokerUnreachableError, ConnectionDroppedError, TimeoutError_, for_code

log = logging.getLogger(__name__)

#: kafka-python's default 1 MB receive cap breaks large fetches (DESIGN.md section 2).
RECEIVE_MAX_BYTES = 256 << 20
#: Requests one connection may have in flight (brokers answer a connection's requests in order).
MAX_IN_FLIGHT = 1000

# Request versions are capped: Fetch v13+ needs topic ids; Produce v12+, EndTxn v5+
# and InitProducerId v5+ switch a transaction to KIP-890 "version 2" semantics.
# eoskafka stays on transaction protocol generation 1 end to end.
VERSION_CAPS: dict[str, int] = {
    "FetchRequest": 12,
    "ProduceRequest": 11,
    "EndTxnRequest": 4,
    "InitProducerIdRequest": 4,
    "AddPartitionsToTxnRequest": 3,
    "MetadataRequest": 12,
    "FindCoordinatorRequest": 4,
    "ListOffsetsRequest": 7,
    "CreateTopicsRequest": 5,
    "CreatePartitionsRequest": 3,
    "OffsetCommitRequest": 7,
    "OffsetFetchRequest": 7,  # v8+ batches groups; one group is all we need
    "DeleteRecordsRequest": 2,
}


class KafkaWire:
    """A connection pool to one cluster; not thread-safe; close() when done.

    >>> wire = KafkaWire(ClientConfig.from_options({"kafka.bootstrap.servers": "h:9092"}))
    ... # doctest: +SKIP
    """

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._client: KafkaNetClient | None = None

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def client(self) -> KafkaNetClient:
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _connect(self) -> KafkaNetClient:
        settings = self.config.to_kafka_python()
        settings["receive_message_max_bytes"] = RECEIVE_MAX_BYTES
        settings.setdefault("reconnect_backoff_max_ms", 1000)
        # request_many() pipelines every request before waiting; with kafka-python's default
        # of 5 in flight, the 6th send to one broker found the connection paused and failed at
        # once (e.g. fencing a pool of 6+ ids). Produce keeps its own limit (TaskWriter).
        settings["max_in_flight_requests_per_connection"] = MAX_IN_FLIGHT
        client = KafkaNetClient(**settings)
        deadline_ms = self.config.connect_timeout_ms
        try:
            client.check_version(timeout_ms=deadline_ms)
        except Exception as exc:  # every failure here means "cannot reach the cluster"
            client.close()
            raise BrokerUnreachableError(
                f"could not connect to Kafka at {','.join(self.config.bootstrap_servers)} "
                f"within {deadline_ms} ms ({type(exc).__name__}: {_safe(exc)}); check "
                "kafka.bootstrap.servers, that the broker is up and reachable from this "
                "host, and the kafka.security.protocol / SASL / SSL settings"
            ) from None
        return client

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a broken client must not mask the real error
                log.debug("error closing Kafka client", exc_info=True)

    def __enter__(self) -> KafkaWire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests --------------------------------------------------------------------------

    def version(self, request_cls: Any) -> int:
        """The highest version both sides speak, capped by :data:`VERSION_CAPS`."""
        cap = VERSION_CAPS.get(request_cls.__name__)
        try:
            return int(self.client.api_version(request_cls, max_version=cap))
        except kerrors.IncompatibleBrokerVersion:
            raise for_code(35)(
                f"{request_cls.__name__.removesuffix('Request')}: the broker does not support "
                "this request"
            ) from None

    def any_node(self) -> int:
        node = self.client.least_loaded_node(bootstrap_fallback=True)
        if node is None:
            brokers = list(self.client.cluster.brokers())
            if not brokers:
                raise BrokerUnreachableError(
                    f"no broker known for {','.join(self.config.bootstrap_servers)}"
                )
            node = brokers[0].node_id
        return int(node)

    def request(self, node: int, request: Any, what: str, timeout_ms: int | None = None) -> Any:
        """Send one request and wait for its response."""
        return self.request_many([(node, request)], what, timeout_ms)[0]

    def request_many(
        self, calls: Sequence[tuple[int, Any]], what: str, timeout_ms: int | None = None
    ) -> list[Any]:
        """Send requests pipelined (all before any wait) and return responses in order.

        Raises ConnectionDroppedError when a broker closes the connection and
        TimeoutError_ when the shared deadline passes; the message names ``what``.
        """
        if not calls:
            return []
        pending = [self.send(node, req, what) for node, req in calls]
        return self.wait(pending, what, timeout_ms)

    def send(self, node: int, request: Any, what: str) -> tuple[int, Any]:
        """Send without waiting; pass the result to :meth:`wait`."""
        client = self.client
        if not client.is_ready(node):
            try:
                client.await_ready(node, timeout_ms=self.config.connect_timeout_ms)
            except Exception as exc:
                raise ConnectionDroppedError(
                    f"{what}: could not connect to broker {self._address(node)} "
                    f"({type(exc).__name__}: {_safe(exc)})"
                ) from None
        return node, client.send(node, request)

    def wait(
        self, pending: Sequence[tuple[int, Any]], what: str, timeout_ms: int | None = None
    ) -> list[Any]:
        """Responses of sent requests, in order, under one shared deadline."""
        client = self.client
        timeout_ms = timeout_ms or self.config.request_timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        for node, future in pending:
            while not future.is_done:
                left_ms = (deadline - time.monotonic()) * 1000
                if left_ms <= 0:
                    raise TimeoutError_(
                        f"{what}: broker {self._address(node)} did not answer within "
                        f"{timeout_ms} ms (kafka.request.timeout.ms)"
                    )
                client.poll(timeout_ms=min(left_ms, 1000), future=future)
            if future.failed():
                exc = future.exception
                raise ConnectionDroppedError(
                    f"{what}: broker {self._address(node)} dropped the connection "
                    f"({type(exc).__name__}: {_safe(exc)})"
                ) from None
        return [future.value for _, future in pending]

    def _address(self, node: int) -> str:
        try:
            broker = self.client.cluster.broker_metadata(node)
        except Exception:
            broker = None
        if broker is None:
            return f"node {node}"
        return f"{broker.host}:{broker.port} (node {node})"

    def update_cluster(self, metadata_response: Any) -> None:
        """Feed a Metadata response we fetched ourselves to the client's broker map."""
        try:
            self.client.cluster.update_metadata(metadata_response)
        except Exception:
            log.debug("could not update cluster metadata", exc_info=True)


def _safe(exc: BaseException) -> str:
    """An exception's text, short; client exceptions never carry our secrets."""
    text = str(exc) or type(exc).__name__
    return text[:300]


def is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, (ConnectionDroppedError, kerrors.KafkaConnectionError))


def flatten(items: Iterable[Iterable[Any]]) -> list[Any]:
    return [x for group in items for x in group]
