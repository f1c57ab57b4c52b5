"""Client settings: every ``kafka.*`` option -> how eoskafka reaches and signs in to Kafka.

One home for them: :mod:`.table` (every key of Kafka's clients, honoured or refused, and
why), :mod:`.keys` (checking keys, shared helpers), :mod:`.config` (the frozen
:class:`~.config.ClientConfig` every connection uses), :mod:`.sasl`, :mod:`.oauth`,
:mod:`.kerberos` (the sign-in) and :mod:`.tls` (TLS versions and suites). Nothing here
imports the rest of the package but :mod:`eos_kafka_source.errors` (and, lazily when a
connection is made, the wire's token and Kerberos helpers).
"""
