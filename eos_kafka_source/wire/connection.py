"""Connections and request dispatch over kafka-python's protocol layer.

Everything eoskafka sends to a broker goes through :class:`KafkaWire`: it owns
one ``kafka.net.compat.KafkaNetClient`` (which brings SASL/SSL and bootstrap),
sends requests pipelined, bounds every wait by a deadline, and turns client
exceptions into ours, naming the broker and the request. A dropped connection
is reported at once, never waited on. Connecting is bounded by
``kafka.socket.connection.setup.timeout.ms`` whatever the broker does, and a
broker that refuses the SASL credentials or the TLS handshake fails the attempt
at once with :class:`~eos_kafka_source.errors.AuthenticationError` (no retries
until the deadline). Secrets are masked in logs and messages (:mod:`.redact`).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Collection, Sequence
from typing import Any

import kafka.errors as kerrors
from kafka.net.compat import KafkaNetClient

from ..acls import remember_client
from ..client.config import ClientConfig
from ..errors import (
    AuthenticationError,
    BrokerUnreachableError,
    ConnectionDroppedError,
    TimeoutError_,
    for_code,
)
from ..kafka_codes import Code
from . import known
from ._kafka_python_fixes import install as _install_kafka_python_fixes
from .bootstrap import bootstrap, bootstrap_nodes, try_connect
from .oauth import token_provider
from .redact import protect
from .refusals import describe, refusal
from .sessions import all_sessions_left_s, session_left_s, session_margin_s

log = logging.getLogger(__name__)
_install_kafka_python_fixes()  # Kafka's answer to a refused login reaches us (see module)

#: kafka-python's default 1 MB receive cap breaks large fetches (docs/performance.md).
RECEIVE_MAX_BYTES = 256 << 20
#: Requests one connection may have in flight (brokers answer a connection's requests in order).
MAX_IN_FLIGHT = 1000
#: Seconds a broker this wire could not reach is passed over for requests any broker can
#: answer (the controller fences a dead broker after ``broker.session.timeout.ms``, 9 s).
UNREACHABLE_S = 10.0

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
    "DescribeConfigsRequest": 4,
    "DescribeTransactionsRequest": 0,
    "ListTransactionsRequest": 2,
    "DescribeProducersRequest": 0,
    "WriteTxnMarkersRequest": 1,
}

class KafkaWire:
    """A connection pool to one cluster; not thread-safe; close() when done.

    >>> wire = KafkaWire(ClientConfig.from_options({"kafka.bootstrap.servers": "h:9092"}))
    ... # doctest: +SKIP
    """

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._client: KafkaNetClient | None = None
        self._siblings: dict[int, KafkaWire] = {}
        #: Brokers this wire could not reach, and when (avoided by :meth:`any_node`).
        self._lost_at: dict[int, float] = {}

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def client(self) -> KafkaNetClient:
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _connect(self) -> KafkaNetClient:
        config = self.config
        protect((config.sasl_password, config.ssl_password))
        if config.oauth is not None:
            protect((config.oauth.client_secret,))
            token_provider(config.oauth).token()  # a failure here names the option to fix
        if config.kerberos is not None:  # a ticket from the KDC now: the same
            from .kerberos import credentials, use

            credentials(config.kerberos)
            use(config.kerberos)  # kafka-python's GSSAPI signs in with the keytab (kerberos.py)
        if config.sasl_token_auth and config.sasl_username:
            from .token_scram import register_token_user  # adds SCRAM's tokenauth extension

            register_token_user(config.sasl_username)
        settings = config.to_kafka_python()
        if config.oauth is not None:  # this process's cached token source (oauth.py)
            settings["sasl_oauth_token_provider"] = token_provider(config.oauth)
        settings["receive_message_max_bytes"] = RECEIVE_MAX_BYTES
        settings.setdefault("reconnect_backoff_max_ms", 1000)
        # request_many() pipelines every request before waiting; with kafka-python's default
        # of 5 in flight, the 6th send to one broker found the connection paused and failed at
        # once (e.g. fencing a pool of 6+ ids). Produce keeps its own limit (TaskWriter).
        settings["max_in_flight_requests_per_connection"] = MAX_IN_FLIGHT
        client = KafkaNetClient(**settings)
        deadline_ms = config.connect_timeout_ms
        deadline = time.monotonic() + deadline_ms / 1000
        first: BaseException | None = None  # reported: later ones are often time-outs
        # Each bootstrap server in turn gets its share of the deadline: one that accepts
        # connections but never answers (paused, stalled) must not use it all up.
        nodes = bootstrap_nodes(client)
        share_ms = max(deadline_ms // max(len(nodes), 1), 1000)
        up: str | None = None
        try:
            for attempt in itertools.count():
                node = nodes[attempt % len(nodes)] if nodes else None
                error, in_sasl, up = try_connect(client, min(share_ms, _ms_left(deadline)), node)
                if error is None:
                    break
                first = first or error
                refused = refusal(self.config, error, in_sasl)
                if refused is not None:
                    raise refused
                if _ms_left(deadline) <= 1:
                    raise error
                # kafka-python's reconnect backoff: 50 ms doubling, at most 1 s
                client.poll(timeout_ms=min(50 << min(attempt, 5), 1000, _ms_left(deadline)))
            bootstrap(client, _ms_left(deadline), via=up)
        except AuthenticationError:
            client.close()
            raise
        except Exception as exc:  # every other failure here means "cannot reach the cluster"
            client.close()
            raise BrokerUnreachableError(
                f"could not connect to Kafka at {','.join(config.bootstrap_servers)} "
                f"within {deadline_ms} ms ({describe(first or exc)}); check "
                "kafka.bootstrap.servers, that the broker is up and reachable from this "
                "host, and that kafka.security.protocol is the listener's (a listener that "
                "requires SASL or TLS drops clients that do not use it; a TLS client gets no "
                "answer, or a closed connection, from a listener that does not speak TLS)"
            ) from None
        return client

    def sibling(self, index: int) -> KafkaWire:
        """Another wire to the same cluster (its own connections), made on first use and
        closed with this one: a lane of :func:`.spread.request_spread`."""
        if index not in self._siblings:
            self._siblings[index] = KafkaWire(self.config)
        return self._siblings[index]

    def close(self) -> None:
        siblings, self._siblings = self._siblings, {}
        for wire in siblings.values():
            wire.close()
        self.reconnect()

    def notice_closed(self) -> None:
        """Let the clients see connections the broker closed while this wire sat unused
        (kept.py), so the next request reconnects instead of failing on a dead socket."""
        for wire in (self, *self._siblings.values()):
            if wire._client is not None:
                try:
                    wire._client.poll(timeout_ms=0)
                except Exception:  # noqa: BLE001 - a broken client: start afresh
                    wire.reconnect()

    def reconnect(self) -> None:
        """Close this wire's own connections (not its siblings'); the next request reconnects."""
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a broken client must not mask the real error
                log.debug("error closing Kafka client", exc_info=True)

    def drop_connection(self, node: int) -> None:
        """Close the connection to ``node`` (its unanswered requests fail); the next send
        reconnects. After a request timed out, as the Java client does: a late answer on
        that connection must not be taken for the answer to a re-sent request."""
        if self._client is None:
            return
        try:
            self._client.close(node)
        except Exception:  # a broken connection must not mask the caller's error
            log.debug("error closing the connection to node %s", node, exc_info=True)

    def __enter__(self) -> KafkaWire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the cluster's wires learned (known.py) ----------------------------------------

    def known_coordinator(self, key: str, key_type: int = 1) -> int | None:
        """The coordinator a wire of this configuration found for ``key`` lately (key type 1
        a transactional id, 0 a group), if this wire knows where that broker is (a fresh
        wire's metadata may not list it yet); None: look it up."""
        node = known.COORDINATORS.get(self.config, (key_type, key))
        if node is None or self.client.cluster.broker_metadata(node) is None:
            return None
        return node

    def learn_coordinator(self, key: str, node: int, key_type: int = 1) -> None:
        known.COORDINATORS.put(self.config, (key_type, key), node)

    def forget_coordinator(self, key: str, key_type: int = 1) -> None:
        """``key``'s coordinator moved (NOT_COORDINATOR, a dropped connection)."""
        known.COORDINATORS.forget(self.config, (key_type, key))

    def known_topic(self, topic: str) -> Any:
        """The ``cluster.TopicInfo`` (partitions, leaders) a wire of this configuration got
        lately for ``topic``, or None."""
        return known.TOPICS.get(self.config, topic)

    def known_leader(self, topic: str, partition: int) -> int | None:
        """``topic``-``partition``'s leader as a wire of this configuration last learned it
        (:meth:`known_topic`), if this wire knows where that broker is; None: ask Metadata."""
        info = self.known_topic(topic)
        node = None if info is None else info.leaders.get(partition)
        if node is None or node < 0 or self.client.cluster.broker_metadata(node) is None:
            return None
        return int(node)

    def learn_topic(self, topic: str, info: Any) -> None:
        known.TOPICS.put(self.config, topic, info)

    def forget_topic(self, topic: str) -> None:
        """A leader of ``topic`` moved (NOT_LEADER_OR_FOLLOWER and the like)."""
        known.TOPICS.forget(self.config, topic)

    # -- requests --------------------------------------------------------------------------

    def version(self, request_cls: Any) -> int:
        """The highest version both sides speak, capped by :data:`VERSION_CAPS`."""
        cap = VERSION_CAPS.get(request_cls.__name__)
        try:
            return int(self.client.api_version(request_cls, max_version=cap))
        except kerrors.IncompatibleBrokerVersion:
            raise for_code(Code.UNSUPPORTED_VERSION)(
                f"{request_cls.__name__.removesuffix('Request')}: the broker does not support "
                "this request"
            ) from None

    def any_node(self, avoid: Collection[int] = ()) -> int:
        """A broker for a request any of them can answer (Metadata, FindCoordinator...):
        one with an open connection if there is one; never one in ``avoid`` or one this
        wire could not reach within :data:`UNREACHABLE_S`, unless no other is known."""
        client = self.client
        shunned = {*avoid, *self._unreachable_now()}
        node = client.least_loaded_node(bootstrap_fallback=True)
        if node is None or node in shunned:
            known = [int(b.node_id) for b in client.cluster.brokers()]
            others = [n for n in known if n not in shunned]
            ready = [n for n in others if client.is_ready(n)]
            node = (ready or others or [n for n in known if n not in avoid] or known or
                    [node])[0]
        if node is None:
            raise BrokerUnreachableError(
                f"no broker known for {','.join(self.config.bootstrap_servers)}"
            )
        return int(node)

    def request_any(self, request: Any, what: str, timeout_ms: int | None = None, *,
                    resend: bool = True) -> Any:
        """Send a request any broker can answer; a broker that cannot be reached gives its
        turn to the next, as the Java client's least-loaded node does (the bootstrap answer
        still lists a broker that is down, and picking it must not fail the micro-batch).
        With ``resend`` (requests that change nothing), a dropped
        connection or an unanswered request is sent again to another broker too."""
        tried: set[int] = set()
        last: BaseException | None = None
        while True:
            node = self.any_node(avoid=tried)
            if node in tried and last is not None:  # every known broker was tried
                raise last
            tried.add(node)
            try:
                pending = [self.send(node, request, what)]
            except ConnectionDroppedError as exc:  # could not connect (send noted it)
                last = exc
                continue
            try:
                return self.wait(pending, what, timeout_ms)[0]
            except (ConnectionDroppedError, TimeoutError_) as exc:
                self._lost_at[node], last = time.monotonic(), exc
                self.drop_connection(node)
                if not resend:
                    raise

    def _unreachable_now(self) -> set[int]:
        now = time.monotonic()
        return {n for n, at in self._lost_at.items() if now - at < UNREACHABLE_S}

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
        remember_client(self.config.principal, ",".join(self.config.bootstrap_servers))
        if self.config.oauth is not None:
            self._renew_session_before_it_ends(node)
        if not client.is_ready(node):
            try:
                client.await_ready(node, timeout_ms=self.config.connect_timeout_ms)
            except Exception as exc:
                self._lost_at[node] = time.monotonic()
                raise ConnectionDroppedError(
                    f"{what}: could not connect to broker {self._address(node)} "
                    f"({describe(exc)})"
                ) from None
        return node, client.send(node, request)

    def flush(self) -> None:
        """Put sent requests on the wire now, without waiting for any answer.

        kafka-python only queues a request in ``send``; its bytes leave at the next poll
        (the first runs the write task up to "wait until writable", the second writes).
        Calling this after a send lets the broker work on the request while the caller
        prepares the next one (read-ahead Fetch, pipelined Produce).
        """
        client = self.client
        client.poll(timeout_ms=0)
        client.poll(timeout_ms=0)

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
                    f"({describe(exc)})"
                ) from None
        return [future.value for _, future in pending]

    def _renew_session_before_it_ends(self, node: int) -> None:
        """Reconnect to ``node`` when its SASL session (KIP-368: the broker's
        ``connections.max.reauth.ms``, bounded by the token's expiry) ends within
        :data:`SESSION_MARGIN` of the session (at most :data:`SESSION_MARGIN_S`) and
        nothing is in flight on it: a request sent on an expired session makes the broker
        close the connection. kafka-python re-authenticates at 85-95% of the session while
        it is polled; this covers a connection that sat unpolled (a task busy between sends)
        past that point."""
        left = session_left_s(self._client, node)
        if left is not None and left < session_margin_s(self._client, node):
            log.debug("SASL session to node %s ends in %.1f s: reconnecting", node, left)
            self.drop_connection(node)

    def sessions_end_within(self, seconds: float) -> bool:
        """Whether a connection of this wire (or a sibling's) has a SASL session ending
        within ``seconds`` (kept.py closes such a wire instead of reusing it)."""
        for wire in (self, *self._siblings.values()):
            for left in all_sessions_left_s(wire._client):
                if left < seconds:
                    return True
        return False

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


def _ms_left(deadline: float) -> int:
    return max(int((deadline - time.monotonic()) * 1000), 1)


