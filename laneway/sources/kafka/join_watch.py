"""Whether a KafkaSource member has joined its group, by what the group coordinator answers.

A broker can accept a client's connection and still never take it into the group: Kafka 3.9
(and 4.x with ``group.coordinator.rebalance.protocols=classic``) does not serve KIP-848's
``ConsumerGroupHeartbeat``, and librdkafka, asked for ``group.protocol=consumer`` there,
marks the coordinator unusable and asks again, for good, without an error event: the
consumer reads nothing and says nothing. So the member does not take its join on trust:

* An assignment proves the join (a member with partitions is in its group).
* Otherwise, :data:`FIRST_LOOK_S` seconds after subscribing, the watch asks the coordinator
  to describe the group (an admin client's ``describe_consumer_groups``, made only then) and
  looks for this member's id there. A member without partitions (more members than
  partitions) is listed: it has joined. A coordinator that answers but does not list this
  member :data:`MISSES` times in a row, :data:`LOOK_EVERY_S` apart, has not taken it in.
  An answer that is an error (the coordinator still loading, say) decides nothing.
* Not taken in under KIP-848's protocol that laneway chose: :meth:`JoinWatch.check` says
  :data:`FALL_BACK`, and the source joins again with the classic protocol (one WARNING
  names the fallback and ``group.protocol``, which forces either).
* Not taken in otherwise, :data:`JOIN_DEADLINE_S` after subscribing: one ERROR with the
  group, the protocol and what the coordinator answered; :meth:`JoinWatch.waiting` gives the
  same reason, so ``/readyz``, the status page and ``laneway status`` show the member not
  ready, never silently idle. It keeps looking every :data:`LOOK_EVERY_S`; once it is taken
  in, one INFO line says so and it is ready.

Every method runs on the source's thread (``poll``'s); :meth:`JoinWatch.waiting` may be read
from any (it reads one string).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

from laneway.logs import get_logger
from laneway.sources.kafka.group_protocol import CONSUMER

# The source's own logger: these lines are about the KafkaSource, not this helper.
logger = get_logger("laneway.sources.kafka.source")

FIRST_LOOK_S = 2.0
"""Seconds after subscribing before the watch first asks the coordinator (a KIP-848 member
is normally in its group within a fraction of a second; an assignment stops the watch)."""
LOOK_EVERY_S = 1.0
"""Seconds between two questions to the coordinator while the member is not listed."""
MISSES = 3
"""Answers in a row that do not list the member before it counts as not taken in."""
JOIN_DEADLINE_S = 20.0
"""Seconds after subscribing before a member the coordinator still does not list is an
ERROR and not ready (a classic join waits out ``group.initial.rebalance.delay.ms``, 3 s by
Kafka's default, and a rebalance of the members already there)."""
DESCRIBE_TIMEOUT_S = 5.0
"""Seconds one describe request may take."""

FALL_BACK = "fall back"
""":meth:`JoinWatch.check`'s verdict: join again with the classic protocol."""


class JoinWatch:
    """Watches one member's join (see the module docstring). ``connection`` reaches the
    cluster (for the admin client, made on the first look); ``fallback``: laneway chose
    KIP-848's protocol and may fall back to the classic one."""

    def __init__(
        self,
        name: str,
        group: str,
        connection: Mapping[str, object],
        fallback: bool,
        admin: Callable[[dict[str, Any]], Any] = AdminClient,
    ) -> None:
        self._name = name
        self._group = group
        self._connection = dict(connection)
        self._fallback = fallback
        self._make_admin = admin
        self._admin: Any = None
        self._protocol = ""
        self._subscribed_at = 0.0
        self._next_look = float("inf")
        self._pending: Future[Any] | None = None
        self._misses = 0
        self._answer = ""
        self._reported = False
        self.joined = True
        """Whether the member is known to be in its group (``True`` until it subscribes)."""
        self._reason = ""

    def subscribed(self, protocol: str, now: float) -> None:
        """The member subscribed (or subscribed again, with a new client) under ``protocol``."""
        self._protocol = protocol
        self._subscribed_at = now
        self._next_look = now + FIRST_LOOK_S
        self._pending = None
        self._misses = 0
        self.joined = False

    def assigned(self) -> None:
        """An assignment arrived: the member is in its group."""
        self._taken_in()

    def waiting(self) -> str:
        """Why the member is not ready, as far as its join goes ("" when nothing is wrong)."""
        return self._reason

    def check(self, consumer: Consumer, now: float) -> str | None:
        """Look at the join when a look is due; :data:`FALL_BACK` when the member should join
        again with the classic protocol, else ``None``."""
        if self.joined or now < self._next_look:
            return None
        if self._pending is None:
            self._ask()
            return None
        if not self._pending.done():
            return None
        listed = self._listed(self._pending, consumer.memberid())
        self._pending = None
        self._next_look = now + LOOK_EVERY_S
        if listed:
            self._taken_in()
            return None
        if listed is not None:  # an error answer decides nothing
            self._misses += 1
            if self._misses >= MISSES and self._fallback and self._protocol == CONSUMER:
                return FALL_BACK
        self._overdue(now)
        return None

    def close(self) -> None:
        """The source is closing: a member the coordinator was seen not to hold, and whose
        ERROR the deadline has not brought yet, gets it now (a run that ends by its
        ``idle_timeout`` must not look like one that found nothing to read)."""
        if not self.joined and self._misses >= MISSES:
            self._overdue(float("inf"))
        self._admin = None
        self._pending = None

    def _ask(self) -> None:
        if self._admin is None:
            self._admin = self._make_admin(self._connection)
        try:
            futures = self._admin.describe_consumer_groups(
                [self._group], request_timeout=DESCRIBE_TIMEOUT_S
            )
        except (KafkaException, ValueError) as error:
            self._answer = f"describing the group failed: {error}"
            self._next_look += LOOK_EVERY_S
            return
        self._pending = futures[self._group]

    def _listed(self, answered: Future[Any], member: str | None) -> bool | None:
        """Whether the coordinator lists ``member``; ``None`` when it answered an error."""
        try:
            described = answered.result(timeout=0)
        except Exception as error:  # the future carries the client's error
            self._answer = f"the coordinator answered {error}"
            return None
        members = [m.member_id for m in described.members]
        coordinator = described.coordinator
        where = f"broker {coordinator.id} at {coordinator.host}:{coordinator.port}"
        state = getattr(described.state, "name", described.state)
        self._answer = (
            f"the coordinator ({where}) holds the group in state {state} with "
            f"{len(members)} member(s), not this one"
        )
        return bool(member) and member in members

    def _overdue(self, now: float) -> None:
        if now - self._subscribed_at < JOIN_DEADLINE_S:
            return
        after = "" if now == float("inf") else f" {now - self._subscribed_at:.0f} s after joining"
        self._reason = (
            f"not in group {self._group!r}{after} with group.protocol={self._protocol}: "
            f"{self._answer}"
        )
        if not self._reported:
            self._reported = True
            logger.error(
                "%s: this member is %s; it reads nothing until the coordinator takes it in "
                "(check the broker's version and group.coordinator.rebalance.protocols, or "
                "set group.protocol)",
                self._name,
                self._reason,
            )

    def _taken_in(self) -> None:
        if self._reported:
            logger.info("%s: this member is in group %r now", self._name, self._group)
        self.joined = True
        self._reported = False
        self._reason = ""
        self._next_look = float("inf")
        self._pending = None
