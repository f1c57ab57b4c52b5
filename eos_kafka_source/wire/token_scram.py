"""Signing in as a Kafka delegation token: SCRAM with the ``tokenauth=true`` extension.

kafka-python's SCRAM mechanism sends no extensions; this one adds ``tokenauth=true`` for the
user names registered as tokens (the token id), which is how a broker knows to check the
password against its delegation tokens (KIP-48). Below :mod:`.connection`, which registers
a configuration's token user; imports nothing of eoskafka's.
"""

from __future__ import annotations

from typing import Any

from kafka.net.sasl import register_sasl_mechanism
from kafka.net.sasl.scram import SaslMechanismScram

#: SCRAM user names this process signs in with as delegation tokens.
_TOKEN_USERS: set[str] = set()


def register_token_user(user: str) -> None:
    _TOKEN_USERS.add(user)


class _TokenScram(SaslMechanismScram):
    """kafka-python's SCRAM, with the ``tokenauth=true`` extension in the client-first
    message for a registered token user (RFC 5802 extensions are part of the signed
    client-first-message-bare, as Kafka's ScramMessages writes them)."""

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        if config.get("sasl_plain_username") in _TOKEN_USERS:
            client = self._scram_client

            def first_message() -> bytes:
                bare = b"n=" + client.user + b",r=" + client.nonce + b",tokenauth=true"
                client.auth_message += bare
                return b"n,," + bare

            client.first_message = first_message


register_sasl_mechanism("SCRAM-SHA-256", _TokenScram, overwrite=True)
register_sasl_mechanism("SCRAM-SHA-512", _TokenScram, overwrite=True)
