"""Fairness: serving groups of messages (tenants) in turn, each within its own caps.

A skewed key space has a few hot keys; a multi-tenant one has a few loud tenants. Key
order already keeps one key from overtaking itself, and ``max_buffered_per_key`` keeps a
hot key's backlog from filling the buffer. :class:`Fairness` goes one level up: messages
are grouped (``group_by``: a tenant, a customer, a region) and the groups with ready work
are served weighted round robin, so one group's flood does not queue every other group
behind it; ``max_in_flight`` and ``max_rate`` cap a group's share of the handlers, and a
handler that raises :class:`Overloaded` halves its group's caps, which grow back by one
step per window of calls that did not (AIMD, like TCP's congestion window).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field

from laneway.types import Message

GroupOf = Callable[[Message], Hashable]
"""Names the group (tenant) of a message; called once per message on the control thread,
so it must be quick and must not fail (a message whose group_by raises is its own group
``None``)."""


class Overloaded(Exception):
    """Raise it from a handler when what this message's group calls is overloaded (a
    tenant's database, a per-customer API quota): the attempt fails and is retried like any
    failure; with ``fairness`` set, a message that still fails after its retries halves its
    group's caps for a while (they grow back as the group's messages succeed)."""


@dataclass(frozen=True)
class Fairness:
    """How groups of messages share the handlers (``Consumer(..., fairness=...)``).

    ``group_by(message)``: the group of a message (a tenant id from a header or the key's
    prefix, say). ``weights``: a group's share of turns relative to the others (default 1;
    a group of weight 3 gets three turns for one of a weight-1 group while both have work).
    ``max_in_flight``: the most messages of one group handed to the engine and not finished
    at once (one number for every group, or per group; ``None``: only ``concurrency``
    bounds it). ``max_rate``: the most messages of one group started per second (likewise).

    Tuning: weights are for tenants that pay for more; ``max_in_flight`` is what keeps a
    flooding tenant from taking every handler (a fraction of ``concurrency``, e.g. a
    quarter, leaves room for the others); ``max_rate`` protects a per-tenant downstream.
    Within a group, messages keep their key order and a hot key is still bounded by
    ``max_buffered_per_key``.
    """

    group_by: GroupOf
    weights: Mapping[Hashable, float] = field(default_factory=dict)
    max_in_flight: int | Mapping[Hashable, int] | None = None
    max_rate: float | Mapping[Hashable, float] | None = None

    def weight(self, group: Hashable) -> float:
        return float(self.weights.get(group, 1.0))

    def in_flight_cap(self, group: Hashable) -> int | None:
        cap = self.max_in_flight
        return cap.get(group) if isinstance(cap, Mapping) else cap

    def rate_cap(self, group: Hashable) -> float | None:
        cap = self.max_rate
        return cap.get(group) if isinstance(cap, Mapping) else cap
