"""How finished work becomes durable: the progress and result writer for a guarantee.

At-least-once (the default): the source's own :class:`~laneway.offsets.progress.Progress`
commits offsets, and results are written through the source's producer and settle their
inputs once acknowledged (:class:`~laneway.producing.result_writers.AcknowledgedResults`).

Exactly-once (``exactly_once=True``): the source's
:class:`~laneway.producing.transactions.Transaction` carries both: results go into it
(:class:`~laneway.producing.result_writers.TransactionalResults`) and every commit is a
transactional commit of the results with the offsets
(:class:`~laneway.offsets.transactional.TransactionalProgress`).
"""

from __future__ import annotations

from typing import Protocol, cast

from laneway.config import ConsumerConfig
from laneway.offsets.progress import Progress
from laneway.offsets.transactional import TransactionalProgress
from laneway.producing.producer import TraceContext
from laneway.producing.result_writers import AcknowledgedResults, ResultWriter, TransactionalResults
from laneway.producing.transactions import Transaction
from laneway.sources.base import Source, TransactionalSource


def durability(
    source: Source,
    config: ConsumerConfig,
    tracing: TraceContext | None,
    state: Stateful | None = None,
) -> tuple[Progress, ResultWriter]:
    """The progress and result writer for ``config.exactly_once``; with ``state`` (a state
    store's keeper) the writer and the transaction are the keeper's wrappings of them."""
    if not config.exactly_once:
        results: ResultWriter = AcknowledgedResults(source.producer, config.retry, tracing)
        return source.progress(config), results if state is None else state.results(results)
    # Consumer checked at construction that the source declares transactions.
    transaction = cast(TransactionalSource, source).transaction()
    if state is not None:
        transaction = state.transaction(transaction)
    progress = TransactionalProgress(transaction, config.metadata_max_bytes)
    results = TransactionalResults(transaction, tracing)
    return progress, results if state is None else state.results(results)


class Stateful(Protocol):
    """What :func:`durability` asks of a state store's keeper
    (:class:`~laneway.state.keeper.StateKeeper`)."""

    def results(self, inner: ResultWriter) -> ResultWriter: ...

    def transaction(self, inner: Transaction) -> Transaction: ...
