"""AcknowledgedWrites: settle an input only after everything written for it is acknowledged."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Generic, TypeAlias, TypeVar, cast

from laneway.errors import AccessDeniedError, LanewayError
from laneway.logs import get_logger
from laneway.producing.producer import Producer, Refusal, WriteFailure
from laneway.results import Produce
from laneway.retry import RetryPolicy, RetryQueue

log = get_logger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class _Held(Generic[T]):
    """An input one of whose records failed: how many of its records are still to be
    acknowledged (those being written again) and whether it was given up. Made only on
    the failure path; an input whose records all succeed needs no object of its own."""

    __slots__ = ("abandoned", "input", "unacknowledged")

    def __init__(self, input: T, unacknowledged: int) -> None:
        self.input = input
        self.unacknowledged = unacknowledged
        self.abandoned = False


_Entry: TypeAlias = tuple[T | _Held[T], Sequence[Produce], str | None, int]
"""What a round writes for one input: the input (or its :class:`_Held` when these are
records written again), the records, the ``like`` topic, and how many writes of them
failed before."""


class AcknowledgedWrites(Generic[T]):
    """Writes records on behalf of inputs and hands back each input once all its records
    are acknowledged by the log.

    This is what keeps at-least-once true when a consumer writes on: an input (the failed
    message behind a dead letter, or the message a handler produced results for) must
    not count as finished, and so must not be committed, before what was written for it
    is durable.

    Writes go out in *rounds*: everything written since the last round is queued on the
    producer at once, and the round ends when the producer has nothing unacknowledged
    left; its inputs are then settled, except those with a record the producer reported
    as failed. Nothing is reported or kept per successful record (a callback per record
    and the objects it keeps alive cost more than the write itself); rounds follow one
    another, so records keep the order they were written in. A round lasts about the
    producer's ``linger.ms`` plus a round trip; the inputs waiting for it hold
    ``max_buffered`` room, so a slow log shows as backpressure.

    A record whose write fails is written again after the ``policy``'s backoff without
    holding up any other input (only the input's own partition's commit point waits);
    each failure is logged as a WARNING. By default that goes on for as long as it takes
    (dead letters must not be lost); with ``give_up_after`` a record that failed that many
    times more gives its input up: :meth:`abandoned` hands it back with the last error,
    for the dead-letter path (handler results). A failure names its record by topic, key
    and value only, so of two identical records in one round either may be the one
    written again: the log ends up with the same records either way. A refusal for good
    (:class:`~laneway.errors.AccessDeniedError`, e.g. no ACL to write the topic) is not
    written again: :meth:`poll` raises it, then and on every later call, and settles
    nothing more (the consumer's run ends; what waited stays uncommitted).

    ``producer`` is created on first use (a consumer without failures never opens a
    Kafka producer). With ``like`` given to :meth:`write`, missing topics are created
    with the partition count of that topic first (dead-letter topics); otherwise a
    missing topic is a failed write.

    Used from the control thread only; call :meth:`poll` every loop turn.
    """

    def __init__(
        self,
        producer: Callable[[], Producer],
        policy: RetryPolicy,
        give_up_after: int | None = None,
    ) -> None:
        self._open_producer = producer
        self._producer: Producer | None = None
        self._policy = policy
        self._give_up_after = give_up_after
        self._waiting: list[_Entry[T]] = []
        self._round: list[_Entry[T]] = []
        self._refused: list[tuple[_Entry[T], Produce, str]] = []
        self._failures: list[WriteFailure] = []
        self._retries: RetryQueue[tuple[_Held[T], Produce, str | None]] = RetryQueue()
        self._settled: list[T] = []
        self._abandoned: list[tuple[T, str, int]] = []
        self._ensured: set[str] = set()
        self._creating: list[tuple[_Entry[T], str]] = []
        self._rewrites = False
        self._round_rewrites = False
        self.pending = 0
        """Inputs written for and not yet settled."""
        self.write_errors = 0
        """Failed writes so far (each one was or will be written again)."""
        self._denied: AccessDeniedError | None = None
        self._closed = False

    def write(self, input: T, records: Sequence[Produce], like: str | None = None) -> None:
        """Write ``records`` for ``input`` with the next round; it is handed back by
        :meth:`poll` once all of them are acknowledged (at once when there are none)."""
        self.pending += 1
        if not records:
            self._settle(input)
        elif like is None:
            self._waiting.append((input, records, None, 0))
        else:
            self._queue_like((input, records, like, 0), like)

    def write_all(self, writes: Iterable[tuple[T, Sequence[Produce]]]) -> None:
        """:meth:`write` for many inputs at once (none with a ``like`` topic): handler
        results, a few hundred thousand a second. An input without records settles with
        the next round."""
        entries: list[_Entry[T]] = [(input, records, None, 0) for input, records in writes]
        self.pending += len(entries)
        self._waiting += entries

    def poll(self) -> list[T]:
        """End the round in flight if the log acknowledged it, start the next one (with the
        rewrites that are due); return the inputs settled since the last call. Raises
        :class:`AccessDeniedError` once the log refused a write for good (after
        :meth:`close`, it settles nothing instead)."""
        if self._denied is not None:
            if self._closed:
                return []
            raise self._denied
        producer = self._producer
        if producer is not None and producer.unacknowledged:
            # Only while something is outstanding: polling a Kafka client releases the
            # GIL, and getting it back from busy handler threads costs the control thread
            # up to a switch interval (see the Producer protocol: nothing outstanding,
            # nothing to hand back).
            failures = self._refused_for_good(producer.poll)
            if failures:
                self._failures += failures
        if self._round and not self._outstanding():
            self._end_round()
        for (held, record, like), tries in self._retries.due():
            if not held.abandoned:
                self._rewrites = True
                entry: _Entry[T] = (held, (record,), like, tries)
                if like is None:
                    self._waiting.append(entry)
                else:
                    self._queue_like(entry, like)
        if self._waiting and not self._round:
            self._start_round()
            if not self._outstanding():  # a log that appends at once (embedded)
                self._end_round()
        settled, self._settled = self._settled, []
        return settled

    def abandoned(self) -> list[tuple[T, str, int]]:
        """Inputs given up since the last call (``give_up_after``), each with the error
        text of its last failed write and how many writes were tried."""
        abandoned, self._abandoned = self._abandoned, []
        return abandoned

    def close(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for queued writes; release the producer."""
        self._closed = True
        if self._producer is not None:
            self._producer.close(timeout)

    def _queue_like(self, entry: _Entry[T], like: str) -> None:
        """Queue an entry whose missing topics are to be created like the ``like`` topic
        (dead letters) before its records are written."""
        self._waiting.append(entry)
        if any(record.topic not in self._ensured for record in entry[1]):
            self._creating.append((entry, like))

    def _start_round(self) -> None:
        entries, self._waiting = self._waiting, []
        self._round = entries
        self._round_rewrites, self._rewrites = self._rewrites, False
        try:
            producer = self._producer
            if producer is None:
                producer = self._producer = self._open_producer()
        except LanewayError as error:
            text = f"{type(error).__name__}: {error}"
            self._refused += [(entry, record, text) for entry in entries for record in entry[1]]
            self._creating = []
            return
        if self._creating:
            entries = self._create_topics(producer, entries)
        records = [record for entry in entries for record in entry[1]]
        refusals: list[Refusal] = self._refused_for_good(lambda: producer.produce(records))
        if refusals:
            owners = [entry for entry in entries for _ in entry[1]]
            self._refused += [(owners[index], records[index], text) for index, text in refusals]

    def _create_topics(self, producer: Producer, entries: list[_Entry[T]]) -> list[_Entry[T]]:
        """Create the missing topics of the round's entries that asked for it; return the
        entries to write (those whose topic could not be created are refused)."""
        creating, self._creating = self._creating, []
        failed: set[int] = set()
        for entry, like in creating:
            for record in entry[1]:
                if record.topic in self._ensured:
                    continue
                try:
                    producer.create_topic_like(record.topic, like)
                    self._ensured.add(record.topic)
                except AccessDeniedError as denial:
                    self._denied = denial
                    raise
                except LanewayError as error:
                    failed.add(id(entry))
                    text = f"{type(error).__name__}: {error}"
                    self._refused += [(entry, refused, text) for refused in entry[1]]
                    break
        return [entry for entry in entries if id(entry) not in failed] if failed else entries

    def _refused_for_good(self, call: Callable[[], R]) -> R:
        """``call()``; an :class:`AccessDeniedError` it raises is kept, so that every
        later :meth:`poll` raises it too and nothing more is settled."""
        try:
            return call()
        except AccessDeniedError as denial:
            self._denied = denial
            raise

    def _outstanding(self) -> bool:
        producer = self._producer
        return producer is not None and producer.unacknowledged > 0

    def _end_round(self) -> None:
        entries, self._round = self._round, []
        if not self._refused and not self._failures and not self._round_rewrites:
            # The common case, in bulk: every record acknowledged, every owner an input
            # (a _Held owner comes only with a rewrite).
            self._settled += cast(list[T], [entry[0] for entry in entries])
            self.pending -= len(entries)
            return
        failed = self._failed_in(entries) if self._refused or self._failures else None
        for entry in entries:
            owner, records, like, tries = entry
            bad = None if failed is None else failed.get(id(entry))
            if bad is None:
                if not isinstance(owner, _Held):
                    self._settle(owner)
                    continue
                owner.unacknowledged -= len(records)
                if not owner.unacknowledged and not owner.abandoned:
                    self._settle(owner.input)
                continue
            held = owner if isinstance(owner, _Held) else _Held(owner, len(records))
            held.unacknowledged -= len(records) - len(bad)
            for record, text in bad:
                self._retry_or_give_up(held, record, like, tries, text)

    def _failed_in(self, entries: list[_Entry[T]]) -> dict[int, list[tuple[Produce, str]]]:
        """The records of the round that failed, by ``id`` of their entry: those refused at
        once, and those the producer reported, found by topic, key and value."""
        failed: dict[int, list[tuple[Produce, str]]] = {}
        refused, self._refused = self._refused, []
        failures, self._failures = self._failures, []
        for entry, record, text in refused:
            failed.setdefault(id(entry), []).append((record, text))
        if not failures:
            return failed
        skip = {(id(entry), id(record)) for entry, record, _ in refused}
        queued: dict[tuple[str, bytes | None, bytes | None], list[tuple[_Entry[T], Produce]]]
        queued = {}
        for entry in entries:
            for record in entry[1]:
                if (id(entry), id(record)) not in skip:
                    queued.setdefault((record.topic, record.value, record.key), []).append(
                        (entry, record)
                    )
        for failure in failures:
            matches = queued.get((failure.topic, failure.value, failure.key))
            if not matches:
                # Cannot happen with a producer that keeps to its protocol; if it does,
                # writing the whole round again may duplicate records but loses none.
                log.error(
                    "a failed write to %s matches no record written; writing the round again",
                    failure.topic,
                )
                return {
                    id(entry): [(record, failure.error) for record in entry[1]] for entry in entries
                }
            entry, record = matches.pop()
            failed.setdefault(id(entry), []).append((record, failure.error))
        return failed

    def _retry_or_give_up(
        self, held: _Held[T], record: Produce, like: str | None, tries: int, text: str
    ) -> None:
        """A write of ``record`` failed after ``tries`` earlier failures: write it again
        after the backoff, or (past ``give_up_after``) give its input up."""
        if held.abandoned:
            return
        self.write_errors += 1
        limit = self._give_up_after
        if limit is not None and tries >= limit:
            log.warning("write to %s failed: %s; giving up", record.topic, text)
            held.abandoned = True
            self.pending -= 1
            self._abandoned.append((held.input, text, tries + 1))
            return
        delay = self._retries.later((held, record, like), tries + 1, self._policy)
        # The delay is not in the WARNING: identical lines are counted, not repeated
        # (see laneway.logs), and a delay with jitter would make every line different.
        log.warning("write to %s failed: %s; writing it again after a backoff", record.topic, text)
        log.debug("writing to %s again in %.2fs", record.topic, delay)

    def _settle(self, input: T) -> None:
        self.pending -= 1
        self._settled.append(input)
