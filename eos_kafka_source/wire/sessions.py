"""How long each SASL session (KIP-368) of a client has left, from kafka-python 3.0's
connections: a request must not be sent on a session about to end, or the broker closes
the connection under it."""

from __future__ import annotations

import time
from typing import Any

from kafka.net.compat import KafkaNetClient

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
