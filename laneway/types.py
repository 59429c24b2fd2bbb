"""The types every part of laneway shares: messages, handlers, partition ids, commit
positions, failures.

This module imports nothing of laneway's and nothing outside the standard library, so a
process-engine worker that only needs :class:`Message` loads neither confluent-kafka nor
the control plane.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeAlias

if TYPE_CHECKING:
    from laneway.results import Outcomes, Produce

Header = tuple[str, "bytes | None"]
"""One record header: ``(name, value)``; the value may be ``None``, as in Kafka."""

PartitionId = tuple[str, int]
"""A partition of a topic: ``(topic, partition)``."""


if TYPE_CHECKING:
    # PEP 696 defaults, so that ``Message`` alone means a message of bytes. Only type
    # checkers see this class: at run time ``Message[Order]`` is a ``types.GenericAlias``
    # of the named tuple below (what ``tuple`` gives every subclass), which the
    # construction-time checks of typed handlers read.
    from typing import Generic

    from typing_extensions import TypeVar

    V = TypeVar("V", covariant=True, default=bytes | None)
    K = TypeVar("K", covariant=True, default=bytes | None)

    class Message(NamedTuple, Generic[V, K]):
        """One record read from a partitioned log: value of type ``V``, key of type ``K``."""

        topic: str
        partition: int
        offset: int
        key: K
        value: V
        headers: Sequence[Header] = ()
        timestamp: int = 0
        delivery_count: int | None = None

else:

    class Message(NamedTuple):
        """One record read from a partitioned log.

        Attributes follow Kafka's record: ``topic``, ``partition``, ``offset``, ``key`` and
        ``value`` (bytes or ``None``), ``headers`` (a sequence of ``(name, bytes | None)``)
        and ``timestamp`` (milliseconds since the epoch, as the producer or log set it).
        ``delivery_count`` is how many times the log has handed this record out, this time
        included (1 on the first delivery), for sources that count deliveries: a Kafka share
        group (:class:`~laneway.sources.share.source.KafkaShareSource`). It is ``None`` for
        sources that do not (a consumer group, the embedded log), where a replay after a crash
        looks like a first delivery.

        With a ``value_deserializer`` (or ``key_deserializer``) the consumer hands the handler
        the decoded value (key) instead of bytes (see :mod:`laneway.serde`): a type checker
        knows it as ``Message[Order]`` (value type first, key type second, both ``bytes |
        None`` when not given), so ``Message`` alone is today's message of bytes.

        A message is an immutable named tuple: creating one is a single C call, reading an
        attribute is as fast as Python gets, and it pickles as a plain tuple — all of which
        count when a consumer moves hundreds of thousands of them a second.
        """

        topic: str
        partition: int
        offset: int
        key: bytes | None
        value: bytes | None
        headers: Sequence[Header] = ()
        timestamp: int = 0
        delivery_count: int | None = None

        def __repr__(self) -> str:
            return (
                f"Message(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, key={self.key!r}, value={_short(self.value)}, "
                f"timestamp={self.timestamp}"
                + ("" if self.delivery_count is None else f", delivery_count={self.delivery_count}")
                + ")"
            )


HandlerResult: TypeAlias = "Produce | Sequence[Produce] | Outcomes | None"
"""What a handler returns: nothing, a :class:`~laneway.Produce` record or a list of them to
be written, or (batch handlers) :class:`~laneway.Outcomes`, one per message. Written once,
so the handler types below (and the ``Consumer`` overloads built on them) change together."""

SyncHandler: TypeAlias = (
    Callable[[Message], HandlerResult] | Callable[[list[Message]], HandlerResult]
)
"""A handler for ``engine="sync"``, ``"thread"`` or ``"process"``: a plain function (or an
object with a plain ``__call__``) taking one :class:`Message`, or with ``batch_size`` a
list of them."""

AsyncHandler: TypeAlias = (
    Callable[[Message], Awaitable[HandlerResult]]
    | Callable[[list[Message]], Awaitable[HandlerResult]]
)
"""A handler for ``engine="async"``: an ``async def`` function (or an object with an
``async def __call__``) taking one :class:`Message`, or with ``batch_size`` a list."""

Handler: TypeAlias = SyncHandler | AsyncHandler
"""Either kind of handler, for code that picks the engine at run time."""

if TYPE_CHECKING:
    T = TypeVar("T")
    U = TypeVar("U")

    TypedSyncHandler: TypeAlias = (
        Callable[[Message[T, U]], HandlerResult] | Callable[[list[Message[T, U]]], HandlerResult]
    )
    """A :data:`SyncHandler` of messages whose value is a ``T`` and key a ``U`` (what the
    consumer's deserializers make), for the ``Consumer`` overloads."""

    TypedAsyncHandler: TypeAlias = (
        Callable[[Message[T, U]], Awaitable[HandlerResult]]
        | Callable[[list[Message[T, U]]], Awaitable[HandlerResult]]
    )
    """An :data:`AsyncHandler` of messages whose value is a ``T`` and key a ``U``."""


def _short(value: object) -> str:
    if not isinstance(value, bytes):  # None, or a decoded value (see laneway.serde)
        text = repr(value)
        return text if len(text) <= 80 else f"{text[:80]}..."
    if len(value) <= 32:
        return repr(value)
    return f"{value[:32]!r}...({len(value)} bytes)"


@dataclass(frozen=True)
class CommitPosition:
    """A committed position: the next offset to read, the commit metadata string, and the
    epoch of the record before the offset (Kafka's committed leader epoch, the embedded
    log's generation; ``None`` when unknown), by which a reader tells whether the log it
    reads is still the one the position was committed on."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class RecordEpochs(Protocol):
    """The epochs the records of a source's last poll were written in: Kafka's leader epochs,
    the embedded log's generations. An :class:`~laneway.offsets.offset_progress.OffsetProgress`
    given one checks the finished offsets restored from commit metadata against them and
    writes them into the metadata it commits (see :mod:`laneway.offsets.tracker`)."""

    def runs(self, start: int, messages: Sequence[Message]) -> list[tuple[int, int]] | None:
        """The epochs of ``messages``, which are items ``start`` to ``start + len - 1`` of
        the list the last ``poll`` returned, all of one partition: ``(first offset, epoch)``
        runs in the order given (:data:`~laneway.offsets.claim_epochs.EpochRuns`), or
        ``None`` when they are not known (then claims with an epoch are not honoured: the
        records are processed again)."""


@dataclass(frozen=True)
class Failure:
    """A message whose handler raised on its last attempt (or that was never run because
    its key's circuit was open): what the dead-letter path and ``on_failure`` receive.

    ``error_type`` and ``error_message`` describe the last exception; ``attempts`` is how
    many times the handler ran (0: not at all); ``traceback`` is the last exception's
    formatted traceback, cut to its last 4,000 characters ("" when there is none, e.g. a
    worker process died).
    """

    message: Message
    error_type: str
    error_message: str
    attempts: int
    traceback: str = ""


@dataclass(frozen=True)
class Waiting:
    """What cannot start until one running handler call returns: ``messages`` queued behind
    it, of ``keys`` distinct keys (``names``: the first :data:`NAMED_KEYS` of them, for
    whoever may show keys), on ``partitions``. With ``ordering="key"`` that is its own
    key's later messages; with ``"partition"`` its partition's; before the process engine
    detaches a stuck worker, every message routed to that worker; on the sync engine,
    everything fetched."""

    messages: int = 0
    keys: int = 0
    names: tuple[bytes | None, ...] = ()
    partitions: tuple[PartitionId, ...] = ()


NAMED_KEYS = 10
"""The most keys a :class:`Waiting` names (it counts them all)."""


def waiting_of(messages: Iterable[Message]) -> Waiting:
    """The :class:`Waiting` of ``messages`` (the messages queued behind one call)."""
    count = 0
    keys: dict[bytes | None, None] = {}
    partitions: set[PartitionId] = set()
    for message in messages:
        count += 1
        keys[message.key] = None
        partitions.add((message.topic, message.partition))
    return Waiting(count, len(keys), tuple(keys)[:NAMED_KEYS], tuple(sorted(partitions)))


@dataclass(frozen=True)
class HotKey:
    """One of the hottest keys: ``buffered`` messages fetched and not finished (queued and
    in flight), and ``held_off`` later ones not kept because the key is at
    ``max_buffered_per_key`` (they are read again when it catches up). Keys holding
    messages off rank first, whatever they buffer at the moment; then the keys holding
    most of the buffer."""

    topic: str
    partition: int
    key: bytes | None
    buffered: int
    held_off: bool = False


@dataclass(frozen=True)
class Restore:
    """A partition whose state is being restored from its changelog (its messages wait;
    the other partitions run): ``records`` read of ``total`` to read, ``full`` when from
    the changelog's start rather than the state file's checkpoint, ``seconds`` since the
    restore began (retries after a failure included)."""

    topic: str
    partition: int
    records: int
    total: int
    full: bool
    seconds: float

    @property
    def remaining(self) -> int:
        """Changelog records still to read (0 before the restore knows its span)."""
        return max(0, self.total - self.records)


@dataclass(frozen=True)
class NotDurable:
    """A partition whose state changes have failed to reach the changelog for ``seconds``
    (longer than laneway waits before it says so): they are kept in memory, and nothing of
    the partition is committed until the changelog takes them (a changelog topic deleted
    while the consumer runs, say). ``error`` is the latest failure's text."""

    topic: str
    partition: int
    changelog: str
    seconds: float
    error: str


@dataclass(frozen=True)
class Stall:
    """A message in its handler for longer than ``stall_timeout``: its position, its key
    and for how many ``seconds`` (as of the last look); ``waiting``: what cannot start
    until it returns (it has waited as long); ``held_back``: messages of its partition
    finished beyond the commit point, which this call holds uncommitted."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    seconds: float
    waiting: Waiting = Waiting()
    held_back: int = 0
