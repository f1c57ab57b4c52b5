"""The settings of Kafka's Java clients (4.4), as their ``ProducerConfig``,
``ConsumerConfig`` and ``AdminClientConfig`` define them, and eoskafka's own: the key
lists :mod:`.table` must cover, every one (tests/unit/test_client_table.py).

Taken from the 4.4.0 jars' own documentation (``java -cp kafka-clients-4.4.0.jar
org.apache.kafka.clients.producer.ProducerConfig`` prints it; likewise the others).
"""

from __future__ import annotations


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_COMMON = _names("""
    bootstrap.resolve.timeout.ms bootstrap.servers client.dns.lookup client.id config.providers
    connections.max.idle.ms enable.metrics.push metadata.cluster.check.enable
    metadata.max.age.ms metadata.recovery.rebootstrap.trigger.ms metadata.recovery.strategy
    metric.reporters metrics.num.samples metrics.recording.level metrics.sample.window.ms
    receive.buffer.bytes reconnect.backoff.max.ms reconnect.backoff.ms request.timeout.ms
    retry.backoff.max.ms retry.backoff.ms sasl.client.callback.handler.class sasl.jaas.config
    sasl.kerberos.kinit.cmd sasl.kerberos.min.time.before.relogin sasl.kerberos.service.name
    sasl.kerberos.ticket.renew.jitter sasl.kerberos.ticket.renew.window.factor
    sasl.login.callback.handler.class sasl.login.class sasl.login.connect.timeout.ms
    sasl.login.read.timeout.ms sasl.login.refresh.buffer.seconds
    sasl.login.refresh.min.period.seconds sasl.login.refresh.window.factor
    sasl.login.refresh.window.jitter sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms
    sasl.mechanism sasl.oauthbearer.allow.unverified.audience
    sasl.oauthbearer.allow.unverified.issuer sasl.oauthbearer.assertion.algorithm
    sasl.oauthbearer.assertion.claim.aud sasl.oauthbearer.assertion.claim.exp.seconds
    sasl.oauthbearer.assertion.claim.iss sasl.oauthbearer.assertion.claim.jti.include
    sasl.oauthbearer.assertion.claim.nbf.seconds sasl.oauthbearer.assertion.claim.sub
    sasl.oauthbearer.assertion.file sasl.oauthbearer.assertion.private.key.file
    sasl.oauthbearer.assertion.private.key.passphrase sasl.oauthbearer.assertion.template.file
    sasl.oauthbearer.client.credentials.client.id
    sasl.oauthbearer.client.credentials.client.secret sasl.oauthbearer.clock.skew.seconds
    sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer
    sasl.oauthbearer.header.urlencode sasl.oauthbearer.jwks.endpoint.refresh.ms
    sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
    sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.jwks.endpoint.url
    sasl.oauthbearer.jwt.retriever.class sasl.oauthbearer.jwt.validator.class
    sasl.oauthbearer.scope sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name
    sasl.oauthbearer.token.endpoint.url security.protocol security.providers send.buffer.bytes
    socket.connection.setup.timeout.max.ms socket.connection.setup.timeout.ms
    ssl.cipher.suites ssl.enabled.protocols ssl.endpoint.identification.algorithm
    ssl.engine.factory.class ssl.key.password ssl.keymanager.algorithm
    ssl.keystore.certificate.chain ssl.keystore.key ssl.keystore.location ssl.keystore.password
    ssl.keystore.type ssl.protocol ssl.provider ssl.secure.random.implementation
    ssl.trustmanager.algorithm ssl.truststore.certificates ssl.truststore.location
    ssl.truststore.password ssl.truststore.type""")
#: Kafka 4.4's ProducerConfig keys.
PRODUCER = _COMMON | _names("""
    acks batch.size buffer.memory client.rack compression.gzip.level compression.lz4.level
    compression.type compression.zstd.level delivery.timeout.ms enable.idempotence
    interceptor.classes key.serializer linger.ms max.block.ms
    max.in.flight.requests.per.connection max.request.size metadata.max.idle.ms
    partitioner.adaptive.partitioning.enable partitioner.availability.timeout.ms
    partitioner.class partitioner.ignore.keys partitioner.rack.aware retries
    transaction.timeout.ms transaction.two.phase.commit.enable transactional.id
    value.serializer""")
#: Kafka 4.4's ConsumerConfig keys.
CONSUMER = _COMMON | _names("""
    allow.auto.create.topics auto.commit.interval.ms auto.offset.reset check.crcs client.rack
    default.api.timeout.ms enable.auto.commit exclude.internal.topics fetch.max.bytes
    fetch.max.wait.ms fetch.min.bytes group.id group.instance.id group.protocol
    group.remote.assignor heartbeat.interval.ms interceptor.classes isolation.level
    key.deserializer max.partition.fetch.bytes max.poll.interval.ms max.poll.records
    partition.assignment.strategy session.timeout.ms share.acknowledgement.mode
    share.acquire.mode value.deserializer""")
#: Kafka 4.4's AdminClientConfig keys.
ADMIN = _COMMON | _names("bootstrap.controllers default.api.timeout.ms retries")
#: eoskafka's own keys (librdkafka's names for PEM files, a user and password without a
#: JAAS line, a Python token provider, krb5.conf's path).
OWN = _names("""
    ssl.ca.location ssl.certificate.location ssl.key.location sasl.username sasl.password
    sasl.oauthbearer.token.provider sasl.kerberos.krb5.conf""")
