"""Which consumer-group protocol a KafkaSource uses: KIP-848's by default, classic on request.

Kafka 4.0 made KIP-848's protocol (``group.protocol=consumer``) generally available: the
broker computes assignments and hands them out incrementally, one heartbeat at a time, with
no group-wide join barrier; the classic protocol is deprecated for removal in Kafka 5.0
(KIP-1274). So laneway uses ``consumer`` unless

* the config sets ``group.protocol`` (``classic`` is honoured as asked), or
* the config sets a setting only the classic protocol has (``session.timeout.ms``,
  ``heartbeat.interval.ms``, ``partition.assignment.strategy``; librdkafka refuses them
  under ``consumer``, where the broker owns them): that config was written for the classic
  protocol, which it then keeps, or
* the cluster turns out not to support it: a broker whose ``group.version`` feature is 0
  fails librdkafka's first heartbeat fatally (see :func:`unsupported`); Kafka 3.9, which
  does not list the heartbeat at all, never takes the member into its group, which the
  source's :class:`~laneway.sources.kafka.join_watch.JoinWatch` finds out from the group
  coordinator within seconds. Either way the source joins again with the classic protocol
  (one WARNING says so, :meth:`Rejoins.fall_back`).

Static membership under KIP-848: a member killed without leaving (kill -9, a lost node)
keeps its ``group.instance.id`` until its session ends (45 s by default, the group's
``consumer.session.timeout.ms``), and a new member with that id is refused fatally
(``UNRELEASED_INSTANCE_ID``): under the classic protocol it would take the old member's
place at once. laneway does not give up on it: it joins again, backing off up to
:data:`UNRELEASED_BACKOFF_S`, until the old session ends (for up to
:data:`UNRELEASED_RETRY_S`), so a restarted static member takes its partitions back about
a session timeout after the kill, as a dynamic one does (not ready meanwhile; one WARNING).
Shorten the group's session to shorten that (see the rebalances guide).

Under the classic protocol laneway sets ``partition.assignment.strategy=cooperative-sticky``
unless the config says otherwise (:data:`DEFAULT_ASSIGNMENT_STRATEGY`).
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import KafkaError

from laneway.logs import get_logger

# The source's own logger: these lines are about the KafkaSource.
logger = get_logger("laneway.sources.kafka.source")

CONSUMER = "consumer"
CLASSIC = "classic"
DEFAULT_ASSIGNMENT_STRATEGY = "cooperative-sticky"
"""Incremental rebalancing: only partitions that move are revoked, and a partition is handed
to its new owner only in the rebalance *after* the old owner's ``on_revoke`` (and the commit
made there) has completed, so a partition is never owned by two members at once and the
members that keep a partition keep processing it through the rebalance. Eager strategies
(``range``, ``roundrobin``) revoke every partition of every member on each rebalance, which
forces a drain and commit of all in-flight work even for partitions that come straight back.
The cost: a partition that moves takes two rebalance rounds instead of one. Used only under
the classic protocol: KIP-848's (``group.protocol=consumer``, laneway's default, see
:mod:`laneway.sources.kafka.group_protocol`) is incremental too, assigned by the broker."""

CLASSIC_ONLY = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")
"""Client settings of the classic protocol that librdkafka refuses under KIP-848's."""
UNRELEASED_RETRY_S = 300.0
"""How long a member refused for an unreleased ``group.instance.id`` keeps joining again."""
UNRELEASED_BACKOFF_S = 5.0
"""The longest wait between two such joins (0.5 s, then doubling)."""


def chosen_protocol(user: Mapping[str, object]) -> tuple[str, bool]:
    """The protocol for the user's settings, and whether laneway chose it (``False``: the
    user set ``group.protocol``; only a protocol laneway chose falls back to classic)."""
    given = user.get("group.protocol")
    if given is not None:
        return str(given).strip().lower(), False
    if any(key in user for key in CLASSIC_ONLY):
        return CLASSIC, True
    return CONSUMER, True


def unsupported(error: KafkaError) -> bool:
    """Whether a fatal consumer error says the cluster does not support KIP-848's protocol
    (its ConsumerGroupHeartbeat request: ``UNSUPPORTED_VERSION`` from the broker, or
    librdkafka's ``_UNSUPPORTED_FEATURE`` when the broker does not list the API). The
    error is a ``_FATAL`` event whose text names the request and the underlying error."""
    text = error.str()
    return "ConsumerGroupHeartbeat" in text and (
        "not supported" in text.lower() or "unsupported" in text.lower()
    )


def classic_config(config: Mapping[str, object]) -> dict[str, object]:
    """``config`` moved to the classic protocol (for a cluster without KIP-848's)."""
    return {
        **config,
        "group.protocol": CLASSIC,
        "partition.assignment.strategy": DEFAULT_ASSIGNMENT_STRATEGY,
    }


def unreleased(error: KafkaError) -> bool:
    """Whether a fatal consumer error is KIP-848's ``UNRELEASED_INSTANCE_ID``: the group
    still holds a member with this ``group.instance.id`` (its session has not ended)."""
    return "instance ID is still used by another member" in error.str()


class Rejoins:
    """Decides whether a consumer whose join failed fatally joins again with a new client,
    with which settings and after how long (see the module docstring): on a cluster without
    KIP-848's protocol when laneway chose it (at once, classic), and while an unreleased
    ``group.instance.id`` waits for its old session to end (backing off). A member that
    owns partitions never rejoins this way: its failure stands."""

    def __init__(self, name: str, protocol_chosen: bool) -> None:
        self._name = name
        self._chosen = protocol_chosen
        self._unreleased_since: float | None = None
        self._waits = 0

    def plan(
        self, error: KafkaError, config: Mapping[str, object], owns: bool, now: float
    ) -> tuple[dict[str, object], float] | None:
        """The settings and the delay of a new join after the fatal ``error``, or ``None``:
        the error stands."""
        if owns:
            return None
        if self._chosen and config.get("group.protocol") == CONSUMER and unsupported(error):
            return self.fall_back(config, error.str()), 0.0
        if not unreleased(error):
            return None
        if self._unreleased_since is None:
            self._unreleased_since = now
            logger.warning(
                "%s: the group still holds a member with group.instance.id=%s (it did not "
                "leave: killed, or its machine lost); joining again until its session ends "
                "(up to %g s; the group's consumer.session.timeout.ms, 45 s by default)",
                self._name,
                config.get("group.instance.id"),
                UNRELEASED_RETRY_S,
            )
        elif now - self._unreleased_since > UNRELEASED_RETRY_S:
            return None
        delay = min(UNRELEASED_BACKOFF_S, 0.5 * 2**self._waits)
        self._waits += 1
        return dict(config), delay

    def fall_back(self, config: Mapping[str, object], why: str) -> dict[str, object]:
        """``config`` moved to the classic protocol, with one WARNING saying ``why``."""
        logger.warning(
            "%s: the cluster does not support KIP-848's consumer group protocol (%s); "
            "joining with the classic protocol (set group.protocol=classic to say so)",
            self._name,
            why,
        )
        return classic_config(config)

    def joined(self) -> None:
        """The member owns partitions: a later refusal starts over."""
        self._unreleased_since = None
        self._waits = 0
