"""The subscribed topics a KafkaSource member cannot read now: not created yet, or deleted.

librdkafka is slow to notice a deleted topic: it keeps the topic's partitions assigned
until its next full metadata refresh (``topic.metadata.refresh.interval.ms``, 5 minutes by
default), reports them through ``error_cb`` only after ``topic.metadata.propagation.max.ms``
(30 s), and meanwhile every commit that includes one of them fails as a whole,
``UNKNOWN_TOPIC_OR_PART``, so even the other topics' offsets stay uncommitted. So the
:class:`TopicWatch` looks for itself: every ``WATCH_EVERY_S`` seconds (one small metadata
request per subscribed topic), at once when a commit or a consumer event says
``UNKNOWN_TOPIC_OR_PART`` (at the start of the next ``poll()``: inside librdkafka's
callbacks the client takes no metadata request). When a topic went or came, it makes
librdkafka's group see it now (a metadata request for all topics, the one the group acts
on): the group rebalances at once, dropping a deleted topic's partitions and assigning
those of a topic created (again), instead of at its next refresh. It turns what it finds
into what an operator needs:

* a topic **deleted** while this member owns some of its partitions: the partitions are
  given up at once, as lost (their committed offsets went with the topic, so there is
  nothing to commit and nothing to drain for), with one WARNING naming the topic; the
  member goes on with its other topics. (Before, the partitions stayed owned until
  librdkafka's rebalance, and every timed commit failed with a WARNING.)
* the topics **missing** now, for ``Consumer.health()``: the consumer is not ready while
  any subscribed topic is missing, and the reason names them. While some are missing the
  watch asks the cluster again every ``RECHECK_S`` seconds, so readiness comes back within
  seconds of the topic (re)appearing; an assignment of one of its partitions clears it at
  once.
* **every** subscribed topic gone: with ``wait_for_topics=True`` the member waits (not
  ready) for them to come back; without it the next ``poll()`` raises
  :class:`~laneway.errors.UnknownTopicError`, as ``open()`` does for a topic that does not
  exist: a consumer with nothing left to read should say so and stop (``laneway run``
  exits with code 3), not look healthy while idle forever.

A :class:`~laneway.sources.share.source.KafkaShareSource` member watches its topics the
same way, through its admin client: it owns no partition, so a deleted topic changes its
readiness and, once every topic is gone, stops it (or makes it wait), and nothing is
given up or nudged (the broker assigns a share group's records).

Regular-expression subscriptions (``^...``) are not watched: they match whatever exists.
Every method runs on the source's thread; :attr:`TopicWatch.missing` may be read from any.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sequence

from confluent_kafka import KafkaError, KafkaException

from laneway.errors import UnknownTopicError
from laneway.logs import get_logger
from laneway.sources.kafka.checks import MetadataClient
from laneway.types import PartitionId

# The source's own logger: these lines are about the KafkaSource, not this helper.
logger = get_logger("laneway.sources.kafka.source")

WATCH_EVERY_S = 10.0
"""Seconds between looks at every subscribed topic (one metadata request per topic): a
topic deleted while nothing of it is committed is noticed within this."""
RECHECK_S = 2.0
"""Seconds between looks while topics are missing: one coming (back) is noticed within this."""
CHECK_TIMEOUT_S = 1.0
"""Seconds one such request may take (the source's thread waits for it)."""

LoseTopics = Callable[[Iterable[str]], list[PartitionId]]
"""Gives up the owned partitions of the topics, as lost; returns them."""


class TopicWatch:
    """Which of the subscribed ``topics`` the cluster does not have now (see the module
    docs). ``name`` names the source in log lines; ``wait`` is ``wait_for_topics``;
    ``lose`` gives up the owned partitions of deleted topics (the source's
    :class:`~laneway.sources.kafka.assignment.Assignment`), ``None`` for a share group
    member, which owns no partition and whose assignment the broker makes (so it is not
    nudged either). The client it looks with is a consumer or an admin client."""

    def __init__(
        self, name: str, topics: Sequence[str], wait: bool, lose: LoseTopics | None
    ) -> None:
        self.missing: tuple[str, ...] = ()
        """The subscribed topics missing now, in subscription order (read from any thread)."""
        self._name = name
        self._named = tuple(t for t in topics if not t.startswith("^"))
        self._patterns = len(self._named) != len(topics)
        self._wait = wait
        self._lose = lose
        self._next_check = time.monotonic() + WATCH_EVERY_S
        self._failure: UnknownTopicError | None = None

    def waiting(self) -> str:
        """Why the consumer is not ready because of its topics ('' when they all exist)."""
        missing = self.missing
        if not missing:
            return ""
        names = ", ".join(repr(t) for t in missing)
        then = (
            "waiting for them (wait_for_topics)"
            if self._wait
            else "consuming the other topics until they come back"
        )
        return f"the cluster does not have topic {names} (not created yet, or deleted); {then}"

    def opened(self, client: MetadataClient) -> None:
        """At ``open()`` with ``wait_for_topics``: note the topics that do not exist yet."""
        missing = [t for t, there in self._look(client, self._named).items() if there is False]
        if missing:
            logger.info(
                "%s: waiting for topic %s: the cluster does not have it yet",
                self._name,
                ", ".join(repr(t) for t in missing),
            )
            self._set_missing(missing)
            self._next_check = time.monotonic() + RECHECK_S

    def reported(self) -> None:
        """librdkafka reported a subscribed topic unavailable: look at the topics at the
        start of the next ``poll()``."""
        self._next_check = 0.0

    def screen(self, *errors: KafkaError | None) -> None:
        """A call failed with ``errors`` (a commit): if one says a topic or partition is
        unknown, look at the topics at the start of the next ``poll()`` (not now: a commit
        may run inside a rebalance callback, where the client takes no other call)."""
        if any(e is not None and e.code() == KafkaError.UNKNOWN_TOPIC_OR_PART for e in errors):
            self._next_check = 0.0

    def assigned(self, topics: Iterable[str]) -> None:
        """Partitions of ``topics`` were assigned (or records of them arrived): those
        topics exist."""
        present = set(topics)
        back = [t for t in self.missing if t in present]
        if back:
            self._back(back)

    def before_poll(self, client: MetadataClient) -> None:
        """Raise the failure of every topic being gone (without ``wait_for_topics``), and
        look at the topics when it is time (every ``WATCH_EVERY_S`` seconds; while some
        are missing, every ``RECHECK_S``)."""
        if self._failure is not None:
            raise self._failure
        if time.monotonic() >= self._next_check:
            self._check(client, self._named)

    # -- internals ------------------------------------------------------------------

    def _check(self, client: MetadataClient, topics: Iterable[str]) -> None:
        found = self._look(client, topics)
        gone = [t for t, there in found.items() if there is False and t not in self.missing]
        back = [t for t, there in found.items() if there is True and t in self.missing]
        if back:
            self._back(back)
        if gone:
            self._gone(gone)
        if (gone or back) and self._lose is not None:
            _nudge(client)
        self._next_check = time.monotonic() + (RECHECK_S if self.missing else WATCH_EVERY_S)

    def _gone(self, topics: list[str]) -> None:
        lost = [] if self._lose is None else self._lose(topics)
        self._set_missing([*self.missing, *topics])
        rest = [t for t in self._named if t not in self.missing]
        if rest or self._patterns:
            then = "consuming goes on with the other topics"
        elif self._wait:
            then = "no topic is left to consume: waiting for them to come back (not ready)"
        else:
            then = "no topic is left to consume: stopping"
        for topic in topics:
            partitions = sorted(p for t, p in lost if t == topic)
            if self._lose is None:
                given_up = "its records went with it"
            elif partitions:
                given_up = (
                    f"its partitions {partitions} are given up (their offsets went with the "
                    "topic; handlers still running there are fenced)"
                )
            else:
                given_up = "this member owned none of its partitions"
            logger.warning(
                "%s: topic %r is gone from the cluster (deleted): %s; %s",
                self._name,
                topic,
                given_up,
                then,
            )
        if not rest and not self._patterns and not self._wait:
            names = ", ".join(repr(t) for t in self._named)
            self._failure = UnknownTopicError(
                f"{self._name}: every topic this consumer reads is gone from the cluster "
                f"({names}); create them again, or wait for them with wait_for_topics=True "
                "(laneway run --wait-for-topics)"
            )

    def _back(self, topics: list[str]) -> None:
        logger.info(
            "%s: topic %s exists now: consuming it", self._name, ", ".join(map(repr, topics))
        )
        self._set_missing([t for t in self.missing if t not in topics])

    def _set_missing(self, topics: Iterable[str]) -> None:
        wanted = set(topics)
        self.missing = tuple(t for t in self._named if t in wanted)

    def _look(self, client: MetadataClient, topics: Iterable[str]) -> dict[str, bool | None]:
        """Whether the cluster has each of ``topics`` (left out: it did not say, e.g. the
        request timed out; nothing is concluded from that, and the others are not asked)."""
        found: dict[str, bool | None] = {}
        for topic in topics:
            try:
                metadata = client.list_topics(topic=topic, timeout=CHECK_TIMEOUT_S)
            except KafkaException:
                break  # the cluster does not answer now: ask again next time
            entry = metadata.topics.get(topic)
            code = None if entry is None or entry.error is None else entry.error.code()
            if entry is None or code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                found[topic] = False
            elif code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                found[topic] = None  # there or not, this client may not know
            else:
                found[topic] = True  # maybe without a leader for now, but there
        return found


def _nudge(client: MetadataClient) -> None:
    """Make librdkafka's group see the topics as they are now: a metadata request for
    every topic is the one its group acts on at once (it rebalances, revoking a deleted
    topic's partitions and assigning those of a topic (re)created), where it would
    otherwise wait for its next refresh (``topic.metadata.refresh.interval.ms``). Made
    only when a topic went or came."""
    with contextlib.suppress(KafkaException):  # else librdkafka's own refresh does it later
        client.list_topics(timeout=CHECK_TIMEOUT_S)
