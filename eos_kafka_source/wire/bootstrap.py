"""A first connection bounded by our own deadline, over kafka-python 3.0's internals.

kafka-python retries a refused bootstrap until its deadline and puts no deadline on a TLS
handshake; here each attempt is made and awaited by us, so a refusal fails at once (with
its reason, :mod:`.refusals`) and a stalled broker cannot hold a connection forever. Each
function falls back to kafka-python's own path when its internals are not the ones
expected.
"""

from __future__ import annotations

from typing import Any

import kafka.errors as kerrors
from kafka.net.compat import KafkaNetClient


def bootstrap_nodes(client: KafkaNetClient) -> list[str]:
    """kafka-python's ids of the bootstrap servers, in the order given (empty if its
    internals are not the ones expected)."""
    cluster = getattr(getattr(client, "_manager", None), "cluster", None)
    brokers = getattr(cluster, "bootstrap_brokers", None)
    return [b.node_id for b in brokers()] if callable(brokers) else []


def try_connect(client: KafkaNetClient, timeout_ms: int,
             node: str | None = None) -> tuple[BaseException | None, bool, str | None]:
    """Open one connection to a bootstrap server (``node``, else kafka-python's choice) and
    wait until it is up or has failed.

    kafka-python retries failed bootstrap connections until its deadline, even when the
    broker refused the credentials, and then reports only "Unable to bootstrap". Making
    the attempts here lets a refusal fail at once, with its reason. Returns ``(None,
    False, node)`` when the connection came up (``(None, False, None)`` when kafka-python's
    internals are not the ones expected: then :func:`bootstrap` alone decides), else its
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


def bootstrap(client: KafkaNetClient, timeout_ms: int, via: str | None = None) -> None:
    """Fetch the cluster's metadata, within ``timeout_ms`` whatever happens.

    ``KafkaNetClient.check_version`` waits on kafka-python's bootstrap, whose deadline
    is checked only between connection attempts; an attempt that never ends (kafka-python
    3.0 puts no deadline on the TLS handshake) makes it wait forever. Here the wait is
    our own. ``via``: the bootstrap server whose connection :func:`try_connect` just saw come
    up; kafka-python's bootstrap would pick one at random, perhaps a paused one, and wait
    on it for the whole deadline.
    """
    manager: Any = getattr(client, "_manager", None)
    start = getattr(manager, "bootstrap_async", None)
    if start is None:
        client.check_version(timeout_ms=timeout_ms)
        return
    cluster: Any = manager.cluster  # bootstrap_async comes with it
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
