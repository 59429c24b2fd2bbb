"""librdkafka's configuration properties, as ``laneway run`` needs to know them: every
name (to map ``LANEWAY_KAFKA_*`` variables to properties and to suggest the closest name
for a typo) and which values are secrets (shown as ``***`` wherever laneway shows a
setting).

Source: librdkafka's ``CONFIGURATION.md`` (the names; properties set through a dedicated
API, such as ``error_cb``, left out) and the ``_RK_SENSITIVE`` flags of
``src/rdkafka_conf.c``, both at librdkafka master after v2.15.0 (commit 4c3b017, July
2026). confluent-kafka 2.16.1 bundles librdkafka 2.16.0; a test checks that it knows every
name here. A name missing here (a property newer than this list) is asked of the
installed librdkafka before it counts as unknown.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

_NAMES = """
    acks allow.auto.create.topics api.version.fallback.ms api.version.request
    api.version.request.timeout.ms auto.commit.enable auto.commit.interval.ms
    auto.offset.reset batch.num.messages batch.size bootstrap.servers broker.address.family
    broker.address.ttl broker.version.fallback builtin.features check.crcs client.dns.lookup
    client.id client.rack compression.codec compression.level compression.type
    connections.max.idle.ms consume.callback.max.messages coordinator.query.interval.ms
    debug delivery.report.only.error delivery.timeout.ms enable.auto.commit
    enable.auto.offset.store enable.gapless.guarantee enable.idempotence enable.metrics.push
    enable.partition.eof enable.random.seed enable.sasl.oauthbearer.unsecure.jwt
    enable.ssl.certificate.verification enabled_events fetch.error.backoff.ms
    fetch.max.bytes fetch.message.max.bytes fetch.min.bytes fetch.queue.backoff.ms
    fetch.wait.max.ms group.id group.instance.id group.protocol group.protocol.type
    group.remote.assignor heartbeat.interval.ms https.ca.location https.ca.pem
    internal.termination.signal isolation.level linger.ms log.connection.close log.queue
    log.thread.name log_level max.in.flight max.in.flight.requests.per.connection
    max.partition.fetch.bytes max.poll.interval.ms max.poll.records message.copy.max.bytes
    message.max.bytes message.send.max.retries message.timeout.ms metadata.broker.list
    metadata.max.age.ms metadata.recovery.rebootstrap.trigger.ms metadata.recovery.strategy
    offset.store.method offset.store.path offset.store.sync.interval.ms
    partition.assignment.strategy partitioner plugin.library.paths produce.offset.report
    queue.buffering.backpressure.threshold queue.buffering.max.kbytes
    queue.buffering.max.messages queue.buffering.max.ms queued.max.messages.kbytes
    queued.min.messages queuing.strategy receive.message.max.bytes
    reconnect.backoff.jitter.ms reconnect.backoff.max.ms reconnect.backoff.ms
    request.required.acks request.timeout.ms retries retry.backoff.max.ms retry.backoff.ms
    sasl.kerberos.keytab sasl.kerberos.kinit.cmd sasl.kerberos.min.time.before.relogin
    sasl.kerberos.principal sasl.kerberos.service.name sasl.mechanism sasl.mechanisms
    sasl.oauthbearer.assertion.algorithm sasl.oauthbearer.assertion.claim.aud
    sasl.oauthbearer.assertion.claim.exp.seconds sasl.oauthbearer.assertion.claim.iss
    sasl.oauthbearer.assertion.claim.jti.include
    sasl.oauthbearer.assertion.claim.nbf.seconds sasl.oauthbearer.assertion.claim.sub
    sasl.oauthbearer.assertion.file sasl.oauthbearer.assertion.jwt.template.file
    sasl.oauthbearer.assertion.private.key.file
    sasl.oauthbearer.assertion.private.key.passphrase
    sasl.oauthbearer.assertion.private.key.pem sasl.oauthbearer.client.credentials.client.id
    sasl.oauthbearer.client.credentials.client.secret sasl.oauthbearer.client.id
    sasl.oauthbearer.client.secret sasl.oauthbearer.config sasl.oauthbearer.extensions
    sasl.oauthbearer.grant.type sasl.oauthbearer.metadata.authentication.type
    sasl.oauthbearer.method sasl.oauthbearer.scope sasl.oauthbearer.sub.claim.name
    sasl.oauthbearer.token.endpoint.url sasl.password sasl.username security.protocol
    session.timeout.ms share.acknowledgement.mode socket.blocking.max.ms
    socket.connection.setup.timeout.ms socket.keepalive.enable socket.max.fails
    socket.nagle.disable socket.receive.buffer.bytes socket.send.buffer.bytes
    socket.timeout.ms ssl.ca.certificate.stores ssl.ca.location ssl.ca.pem
    ssl.certificate.location ssl.certificate.pem ssl.cipher.suites ssl.crl.location
    ssl.curves.list ssl.endpoint.identification.algorithm ssl.engine.id ssl.engine.location
    ssl.key.location ssl.key.password ssl.key.pem ssl.keystore.location
    ssl.keystore.password ssl.providers ssl.sigalgs.list statistics.interval.ms
    sticky.partitioning.linger.ms topic.blacklist topic.metadata.propagation.max.ms
    topic.metadata.refresh.fast.cnt topic.metadata.refresh.fast.interval.ms
    topic.metadata.refresh.interval.ms topic.metadata.refresh.sparse transaction.timeout.ms
    transactional.id
"""
PROPERTIES = frozenset(_NAMES.split())
"""Every librdkafka property that can be set as text (global and topic properties)."""

SENSITIVE = frozenset(
    {
        # flagged _RK_SENSITIVE in rdkafka_conf.c (librdkafka redacts them in its own dumps)
        "ssl.key.location",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl_key",
        "ssl.ca.pem",
        "ssl.keystore.password",
        "sasl.username",
        "sasl.password",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.assertion.private.key.file",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "sasl.oauthbearer.assertion.private.key.pem",
        # an alias of sasl.oauthbearer.client.secret (aliases carry no flag of their own)
        "sasl.oauthbearer.client.credentials.client.secret",
    }
)
"""The properties librdkafka itself treats as sensitive, and their aliases."""

SECRET_SUFFIXES = (".password", ".secret", ".pem", ".passphrase")
"""A property whose name ends so is a secret even if librdkafka does not flag it (e.g.
``https.ca.pem``); so is one with a ``.key`` part (``ssl.keystore.location``,
``sasl.kerberos.keytab``) and every ``sasl.*.config``."""

SECRET_WORDS = ("password", "secret", "key", "pem", "token", "credential", "jaas")
"""A name librdkafka does not know (newer than :data:`PROPERTIES`, or misspelt) is a
secret when it contains one of these."""

REDACTED = "***"
"""What a secret value is shown as."""

_PROBE = "laneway.unknown.probe"


def is_secret(name: str) -> bool:
    """Whether the value of librdkafka property ``name`` must never be shown."""
    lowered = name.lower()
    if lowered in SENSITIVE or lowered.endswith(SECRET_SUFFIXES) or ".key" in lowered:
        return True
    if lowered.startswith("sasl.") and lowered.endswith(".config"):
        return True
    return lowered not in PROPERTIES and any(word in lowered for word in SECRET_WORDS)


def shown(name: str, value: object) -> str:
    """``value`` of property ``name`` as laneway shows it: ``***`` for a secret."""
    return REDACTED if is_secret(name) else repr(value)


def redacted(config: Mapping[str, object]) -> dict[str, object]:
    """A copy of a librdkafka ``config`` with every secret value replaced by ``***``, for
    logs and errors."""
    return {key: REDACTED if is_secret(key) else value for key, value in config.items()}


def is_property(name: str) -> bool:
    """Whether librdkafka knows property ``name``: listed here, or known to the installed
    librdkafka (asked without creating a client)."""
    return name in PROPERTIES or _librdkafka_knows(name)


def closest_property(name: str) -> str | None:
    """The known property closest to ``name`` (a typo's likely meaning), if any."""
    match = difflib.get_close_matches(name.lower(), sorted(PROPERTIES), n=1, cutoff=0.6)
    return match[0] if match else None


def variable_suffix(name: str) -> str:
    """The part of ``LANEWAY_KAFKA_<SUFFIX>`` that sets property ``name``:
    ``client.id`` -> ``CLIENT_ID``."""
    return name.upper().replace(".", "_")


_BY_SUFFIX = {variable_suffix(name): name for name in PROPERTIES}


def property_of(suffix: str) -> str | None:
    """The property that variable suffix ``suffix`` names (``SASL_PASSWORD`` ->
    ``sasl.password``), matched against the known names, since dots and underscores
    both read as ``_``; ``None`` when none does."""
    return _BY_SUFFIX.get(suffix.upper())


def _librdkafka_knows(name: str) -> bool:
    # A configuration is checked name by name, in order, before any client exists, and
    # the first name refused is reported: a name librdkafka knows lets the probe (which
    # it cannot know) be the one refused.
    from confluent_kafka import KafkaError, KafkaException, Producer

    try:
        Producer({name: "", _PROBE: ""})
    except KafkaException as error:
        reason = error.args[0] if error.args else None
        text = reason.str() if isinstance(reason, KafkaError) else str(error)
        return text != f'No such configuration property: "{name}"'
    except Exception:  # a setting of the Python client (a callback) wanting another type
        return True
    return True
