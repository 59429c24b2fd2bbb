"""The backlog of one consumer, sampled on its control thread: the autoscaling signal.

Once a second the control plane hands the :class:`BacklogWatch` the figures of the
partitions it owns (``Progress.backlog``: from the offset trackers and the log ends) and
how many messages it has finished so far. The watch keeps the latest :class:`Backlog`,
which ``Consumer.backlog()``, ``GET /backlog`` on the health port and the metrics
``laneway_backlog_messages`` and ``laneway_drain_seconds`` report. The figures per
partition are those ``laneway lag`` reads from the group
(:class:`~laneway.offsets.backlog.PartitionBacklog`): the lag, and the lag minus the
offsets finished beyond the commit point, as the consumer knows them now.
"""

from __future__ import annotations

from dataclasses import dataclass

from laneway.health import stall_as_json
from laneway.offsets.backlog import RATE_WINDOW, FinishingRate, PartitionBacklog, drain_seconds
from laneway.types import PartitionId, Stall

SAMPLE_EVERY = 1.0
"""Seconds between two samples of the backlog (and of the gauges, which come with it)."""


@dataclass(frozen=True)
class Backlog:
    """How much work this consumer has left, about once a second (``Consumer.backlog()``).

    ``lag``: the log ends minus the committed offsets of the partitions it owns (Kafka's
    consumer lag); ``backlog``: the lag minus the offsets finished beyond the commit point
    (a key holding the commit point back shows its partition's tail as lag, though most
    of it is done), as the consumer knows them now: what the next commit's metadata will
    record, ``laneway lag``'s figure up to a ``commit_interval`` ahead; ``rate``: messages it
    finished (processed or given up on) per second over the last
    :data:`~laneway.offsets.backlog.RATE_WINDOW` seconds of work
    (:class:`~laneway.offsets.backlog.FinishingRate`); ``drain_seconds``: ``backlog /
    rate``, the time to work it off at that rate, finite even without a rate
    (:func:`~laneway.offsets.backlog.drain_seconds`).

    ``backlog``, ``lag`` and ``drain_seconds`` are ``None`` for a share group: it commits
    no offsets, so a member cannot know what is left (``laneway lag --share`` says what
    can be known). ``partitions``: the figures of each owned partition whose log end is
    known (``PartitionBacklog``, as ``laneway lag`` prints them). ``stalled``: the calls
    past ``stall_timeout`` when it was sampled, with what waits behind each (as
    ``/readyz`` shows them): a backlog that does not shrink says why.
    """

    backlog: int | None = 0
    lag: int | None = 0
    rate: float = 0.0
    drain_seconds: float | None = 0.0
    partitions: tuple[PartitionBacklog, ...] = ()
    stalled: tuple[Stall, ...] = ()

    def as_json(self, keys: bool = False) -> dict[str, object]:
        """``GET /backlog``: the four figures (the rate and drain time to 3 decimals), the
        partitions as ``laneway lag --json`` prints them and the stalled calls as
        ``/readyz`` shows them (their keys only with ``keys=True``)."""
        drain = self.drain_seconds
        return {
            "backlog": self.backlog,
            "lag": self.lag,
            "rate": round(self.rate, 3),
            "drain_seconds": None if drain is None else round(drain, 3),
            "partitions": [p.as_json() for p in self.partitions],
            "stalled": [stall_as_json(stall, keys) for stall in self.stalled],
        }


class BacklogWatch:
    """Samples a consumer's :class:`Backlog` every :data:`SAMPLE_EVERY` seconds on its
    control thread and keeps the latest (:attr:`latest`, safe to read from any thread: it
    is replaced whole).

    The rate is :class:`~laneway.offsets.backlog.FinishingRate`'s, the one ``laneway top``
    shows too. Tuning: none; the window (``RATE_WINDOW``) is as long as KEDA's default
    polling interval and the Prometheus scrape intervals in use, smooth enough that an
    autoscaler does not follow every burst.
    """

    def __init__(self, window: float = RATE_WINDOW) -> None:
        self._rate = FinishingRate(window)
        self._sampled_at: float | None = None
        self.latest = Backlog()

    def due(self, now: float) -> bool:
        """Whether a :meth:`sample` is due."""
        return self._sampled_at is None or now - self._sampled_at >= SAMPLE_EVERY

    def sample(
        self,
        now: float,
        finished: int,
        partitions: tuple[PartitionBacklog, ...] | None,
        stalled: tuple[Stall, ...] = (),
    ) -> Backlog:
        """The backlog at ``now``, kept as :attr:`latest`: ``finished`` is how many
        messages the consumer finished so far, ``partitions`` the figures of the partitions
        it owns (``Progress.backlog``; ``None``: a source without offsets), ``stalled``
        the calls stalled now."""
        self._sampled_at = now
        backlog = None if partitions is None else sum(p.backlog for p in partitions)
        rate, span = self._rate.sample(now, finished, backlog)
        if partitions is None or backlog is None:
            self.latest = Backlog(None, None, rate, None, stalled=stalled)
            return self.latest
        drain = drain_seconds(backlog, rate, span)
        lag = sum(p.lag for p in partitions)
        self.latest = Backlog(backlog, lag, rate, drain, partitions, stalled)
        return self.latest

    def finished_beyond(self) -> dict[PartitionId, int]:
        """Finished messages beyond each owned partition's commit point, as last sampled
        (the stall watch's thread reads it: the sample is replaced whole)."""
        return {(p.topic, p.partition): p.finished_beyond for p in self.latest.partitions}
