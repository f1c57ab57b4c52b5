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
import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

import kafka.errors as kerrors
from kafka.net.compat import KafkaNetClient

from ..acls import remember_client
from ..client_config import ClientConfig
from ..errors import (
    AuthenticationError,
    BrokerUnreachableError,
    ConnectionDroppedError,
    TimeoutError_,
    for_code,
)
from ._kafka_python_fixes import install as _install_kafka_python_fixes
from .oauth import OAuthTokenError, describe_claims, token_provider
from .redact import protect, redact

log = logging.getLogger(__name__)
_install_kafka_python_fixes()  # Kafka's answer to a refused login reaches us (see module)

#: kafka-python's default 1 MB receive cap breaks large fetches (docs/performance.md).
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
    "DescribeConfigsRequest": 4,
    "DescribeTransactionsRequest": 0,
    "ListTransactionsRequest": 2,
    "DescribeProducersRequest": 0,
}

#: Texts of TLS handshake failures that retrying cannot fix.
_TLS_REFUSALS = ("CERTIFICATE_VERIFY_FAILED", "certificate verify failed", "WRONG_VERSION_NUMBER",
                 "mismatch", "doesn't match", "UNKNOWN_CA", "BAD_CERTIFICATE",
                 "CERTIFICATE_REQUIRED")
#: Texts of failures to load this side's TLS files (missing, not PEM, wrong key password).
_TLS_FILE_ERRORS = ("PEM lib", "BAD_DECRYPT", "NO_START_LINE", "KEY_VALUES_MISMATCH",
                    "NO_CERTIFICATE_OR_CRL_FOUND", "No such file", "Is a directory",
                    "Permission denied")


class KafkaWire:
    """A connection pool to one cluster; not thread-safe; close() when done.

    >>> wire = KafkaWire(ClientConfig.from_options({"kafka.bootstrap.servers": "h:9092"}))
    ... # doctest: +SKIP
    """

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._client: KafkaNetClient | None = None
        self._siblings: dict[int, KafkaWire] = {}

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
            from .kerberos import credentials

            credentials(config.kerberos)
        if config.sasl_token_auth and config.sasl_username:
            from .token_scram import register_token_user  # adds SCRAM's tokenauth extension

            register_token_user(config.sasl_username)
        settings = config.to_kafka_python()
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
        nodes = _bootstrap_nodes(client)
        share_ms = max(deadline_ms // max(len(nodes), 1), 1000)
        up: str | None = None
        try:
            for attempt in itertools.count():
                node = nodes[attempt % len(nodes)] if nodes else None
                error, in_sasl, up = _attempt(client, min(share_ms, _ms_left(deadline)), node)
                if error is None:
                    break
                first = first or error
                refused = self._refusal(error, in_sasl)
                if refused is not None:
                    raise refused
                if _ms_left(deadline) <= 1:
                    raise error
                # kafka-python's reconnect backoff: 50 ms doubling, at most 1 s
                client.poll(timeout_ms=min(50 << min(attempt, 5), 1000, _ms_left(deadline)))
            _bootstrap(client, _ms_left(deadline), via=up)
        except AuthenticationError:
            client.close()
            raise
        except Exception as exc:  # every other failure here means "cannot reach the cluster"
            client.close()
            raise BrokerUnreachableError(
                f"could not connect to Kafka at {','.join(config.bootstrap_servers)} "
                f"within {deadline_ms} ms ({_describe(first or exc)}); check "
                "kafka.bootstrap.servers, that the broker is up and reachable from this "
                "host, and that kafka.security.protocol is the listener's (a listener that "
                "requires SASL or TLS drops clients that do not use it; a TLS client gets no "
                "answer, or a closed connection, from a listener that does not speak TLS)"
            ) from None
        return client

    def _refusal(self, exc: BaseException, in_sasl: bool) -> AuthenticationError | None:
        """The error for a first connection the broker refused for good (bad credentials,
        an untrusted certificate), or None when retrying may help."""
        config, servers = self.config, ",".join(self.config.bootstrap_servers)
        if isinstance(exc, OAuthTokenError):  # raised by the token source, inside kafka-python
            return exc
        if in_sasl and config.kerberos is not None:
            return _kerberos_refusal(exc, config, servers)
        if isinstance(exc, (kerrors.UnsupportedSaslMechanismError, kerrors.IllegalSaslStateError)):
            # Refused at SaslHandshake, before any credential was sent: Kafka answers 33 for
            # a mechanism the listener does not enable, 34 on a listener without SASL.
            return AuthenticationError(
                f"the listener at {servers} does not accept SASL {config.sasl_mechanism} "
                f"({_describe(exc)}); check that kafka.security.protocol "
                f"({config.security_protocol}) is the protocol of this listener (a PLAINTEXT "
                "or SSL listener does no SASL) and that kafka.sasl.mechanism is one of the "
                "broker's sasl.enabled.mechanisms for it"
            )
        if in_sasl and config.oauth is not None:
            source = token_provider(config.oauth)
            said = f"; it answered {source.last_refusal}" if source.last_refusal else ""
            return AuthenticationError(
                f"the broker at {servers} refused the OAUTHBEARER token from "
                f"{config.oauth.source} ({_describe(exc)}{said}; the token: "
                f"{describe_claims(source.current)}); check that the token's audience is the "
                "broker's sasl.oauthbearer.expected.audience (ask the identity provider for it, "
                "e.g. with scope in kafka.sasl.jaas.config), that its issuer and signing key "
                "are the ones the broker trusts (sasl.oauthbearer.jwks.endpoint.url), that it "
                "has not expired (this host's clock), and that the listener enables "
                "OAUTHBEARER"
            )
        if in_sasl and config.sasl_token_auth:
            return AuthenticationError(
                f"the broker at {servers} refused the delegation token "
                f"{config.sasl_username!r} (SASL {config.sasl_mechanism}, tokenauth; "
                f"{_describe(exc)}); the token has expired (not renewed within the broker's "
                "delegation.token.expiry.time.ms, or past its delegation.token.max.lifetime.ms) "
                "or was never created there: obtain a new one on the driver and restart the "
                "query with it (docs/security.md#delegation-tokens); the listener must also "
                "enable this SCRAM mechanism"
            )
        if in_sasl:
            return AuthenticationError(
                f"the broker at {servers} refused SASL {config.sasl_mechanism} authentication "
                f"as user {config.sasl_username!r} ({_describe(exc)}); check the user name and "
                "password in kafka.sasl.jaas.config (or kafka.sasl.username / "
                "kafka.sasl.password), that kafka.sasl.mechanism is enabled on the broker, "
                "and that the user exists there for that mechanism"
            )
        text = _describe(exc)
        if not config.security_protocol.endswith("SSL"):
            return None
        if any(marker in text for marker in _TLS_FILE_ERRORS):
            return AuthenticationError(
                f"could not load the TLS files for {servers} ({text}); check that "
                "kafka.ssl.truststore.location (or kafka.ssl.ca.location), "
                "kafka.ssl.certificate.location and kafka.ssl.key.location name readable PEM "
                "files and that kafka.ssl.key.password decrypts the key"
            )
        if any(marker in text for marker in _TLS_REFUSALS):
            return AuthenticationError(
                f"the TLS handshake with {servers} failed ({text}); check that "
                "kafka.ssl.truststore.location (or kafka.ssl.ca.location) is the PEM file of "
                "the CA that signed the broker's certificate, that the host in "
                "kafka.bootstrap.servers is one the certificate names (or set "
                "kafka.ssl.endpoint.identification.algorithm to ''), that this listener "
                "speaks TLS, and, if the broker requires client certificates, "
                "kafka.ssl.certificate.location and kafka.ssl.key.location"
            )
        return None

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
        remember_client(self.config.principal, ",".join(self.config.bootstrap_servers))
        if self.config.oauth is not None:
            self._renew_session_before_it_ends(node)
        if not client.is_ready(node):
            try:
                client.await_ready(node, timeout_ms=self.config.connect_timeout_ms)
            except Exception as exc:
                raise ConnectionDroppedError(
                    f"{what}: could not connect to broker {self._address(node)} "
                    f"({_describe(exc)})"
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
                    f"({_describe(exc)})"
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


def _safe(exc: BaseException) -> str:
    """An exception's text, short, with any registered secret masked."""
    text = redact(str(exc)) or type(exc).__name__
    return text[:300]


def _describe(exc: BaseException) -> str:
    """``Type: text`` of an exception, without the type names kafka-python repeats."""
    name, text = type(exc).__name__, _safe(exc)
    text = re.sub(r"\b(\w+): (?:\1: )+", r"\1: ", text)
    return text if name in text else f"{name}: {text}"


def _ms_left(deadline: float) -> int:
    return max(int((deadline - time.monotonic()) * 1000), 1)


def _kerberos_refusal(exc: BaseException, config: ClientConfig,
                      servers: str) -> AuthenticationError:
    """A GSSAPI sign-in that failed: our own KerberosError (no ticket, from wire/kerberos.py)
    as it is, else the broker's refusal of the ticket."""
    from .kerberos import KerberosError

    if isinstance(exc, KerberosError):
        return exc
    krb = config.kerberos
    assert krb is not None
    return AuthenticationError(
        f"the broker at {servers} refused Kerberos (SASL GSSAPI) sign-in as {krb.principal} "
        f"({_describe(exc)}); check that kafka.sasl.kerberos.service.name ({krb.service_name}) "
        "is the first part of the broker's principal and that the host in "
        "kafka.bootstrap.servers is the one in it, that the broker's keytab holds that "
        "principal's current key, and that the listener enables GSSAPI"
    )


def _bootstrap_nodes(client: KafkaNetClient) -> list[str]:
    """kafka-python's ids of the bootstrap servers, in the order given (empty if its
    internals are not the ones expected)."""
    cluster = getattr(getattr(client, "_manager", None), "cluster", None)
    brokers = getattr(cluster, "bootstrap_brokers", None)
    return [b.node_id for b in brokers()] if callable(brokers) else []


def _attempt(client: KafkaNetClient, timeout_ms: int,
             node: str | None = None) -> tuple[BaseException | None, bool, str | None]:
    """Open one connection to a bootstrap server (``node``, else kafka-python's choice) and
    wait until it is up or has failed.

    kafka-python retries failed bootstrap connections until its deadline, even when the
    broker refused the credentials, and then reports only "Unable to bootstrap". Making
    the attempts here lets a refusal fail at once, with its reason. Returns ``(None,
    False, node)`` when the connection came up (``(None, False, None)`` when kafka-python's
    internals are not the ones expected: then :func:`_bootstrap` alone decides), else its
    error and whether it failed during SASL authentication (after ApiVersions, with SASL on).
    """
    # The manager's get_connection, not client.maybe_connect: a failed connection must not
    # start kafka-python's background bootstrap, which has no deadline.
    get_connection = getattr(getattr(client, "_manager", None), "get_connection", None)
    node = node if node is not None else client.least_loaded_node(bootstrap_fallback=True)
    if get_connection is None or node is None:
        return None, False, None
    try:
        conn = get_connection(node, timeout_ms=timeout_ms, refresh_metadata_on_err=False)
    except Exception:  # not ready (kafka-python's backoff) or unknown: let _bootstrap decide
        return None, False, None
    future = getattr(conn, "init_future", None)
    if future is None:
        return None, False, None
    if not future.is_done:
        client.poll(timeout_ms=timeout_ms, future=future)
    if not future.is_done:  # a paused broker; a TLS handshake with a plain listener
        error = kerrors.KafkaTimeoutError(f"no answer within {timeout_ms} ms")
        conn.close(error)
        return error, False, None
    if future.succeeded():
        return None, False, node
    in_sasl = bool(getattr(conn, "sasl_enabled", False)) and (
        getattr(conn, "broker_version_data", None) is not None)
    return future.exception, in_sasl, None


def _bootstrap(client: KafkaNetClient, timeout_ms: int, via: str | None = None) -> None:
    """Fetch the cluster's metadata, within ``timeout_ms`` whatever happens.

    ``KafkaNetClient.check_version`` waits on kafka-python's bootstrap, whose deadline
    is checked only between connection attempts; an attempt that never ends (kafka-python
    3.0 puts no deadline on the TLS handshake) makes it wait forever. Here the wait is
    our own. ``via``: the bootstrap server whose connection :func:`_attempt` just saw come
    up; kafka-python's bootstrap would pick one at random, perhaps a paused one, and wait
    on it for the whole deadline.
    """
    manager = getattr(client, "_manager", None)
    start = getattr(manager, "bootstrap_async", None)
    if start is None:
        client.check_version(timeout_ms=timeout_ms)
        return
    cluster = getattr(manager, "cluster", None)
    only = [b for b in cluster.bootstrap_brokers() if b.node_id == via] if via else []
    if only:  # for this bootstrap only (an instance attribute over the method)
        cluster.bootstrap_brokers = lambda: only
    try:
        future = start(timeout_ms=timeout_ms)
        client.poll(timeout_ms=timeout_ms, future=future)
    finally:
        if only:
            del cluster.bootstrap_brokers
    if not future.is_done:
        raise kerrors.KafkaTimeoutError(f"no broker answered within {timeout_ms} ms")
    if future.failed():
        raise future.exception


#: A SASL session with less than this share of its lifetime left (at most
#: SESSION_MARGIN_S seconds) is not used for another request: kafka-python re-authenticates
#: at 85-95%, so only a connection it missed comes this close.
SESSION_MARGIN = 0.04
SESSION_MARGIN_S = 2.0


def connections(client: KafkaNetClient | None) -> dict[int, Any]:
    """kafka-python 3.0's open connections by node id ({} if its internals moved)."""
    return dict(getattr(getattr(client, "_manager", None), "_conns", None) or {})


def session_margin_s(client: KafkaNetClient | None, node: int) -> float:
    reauth = getattr(connections(client).get(node), "_reauth", None)
    lifetime_s = getattr(reauth, "session_lifetime_ms", 0) / 1000
    return min(SESSION_MARGIN_S, SESSION_MARGIN * lifetime_s)


def _session_left(conn: Any) -> float | None:
    """Seconds until ``conn``'s SASL session ends, None if it has no end (kafka-python
    3.0's ``SaslReauthenticator``; None if its internals are not the ones expected)."""
    reauth = getattr(conn, "_reauth", None)
    lifetime_ms = getattr(reauth, "session_lifetime_ms", 0)
    since = getattr(reauth, "authenticated_at", None)
    if not lifetime_ms or since is None or getattr(reauth, "is_reauthenticating", False):
        return None
    return since + lifetime_ms / 1000 - time.monotonic()


def session_left_s(client: KafkaNetClient | None, node: int) -> float | None:
    """Seconds left in the SASL session of the connection to ``node`` with no request in
    flight, else None."""
    conn = connections(client).get(node)
    if conn is None or getattr(conn, "in_flight_requests", None):
        return None
    return _session_left(conn)


def all_sessions_left_s(client: KafkaNetClient | None) -> list[float]:
    return [left for conn in connections(client).values()
            if (left := _session_left(conn)) is not None]


def is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, (ConnectionDroppedError, kerrors.KafkaConnectionError))


def flatten(items: Iterable[Iterable[Any]]) -> list[Any]:
    return [x for group in items for x in group]
