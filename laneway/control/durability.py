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

from typing import cast

from laneway.config import ConsumerConfig
from laneway.offsets.progress import Progress
from laneway.offsets.transactional import TransactionalProgress
from laneway.producing.producer import TraceContext
from laneway.producing.result_writers import AcknowledgedResults, ResultWriter, TransactionalResults
from laneway.sources.base import Source, TransactionalSource


def durability(
    source: Source, config: ConsumerConfig, tracing: TraceContext | None
) -> tuple[Progress, ResultWriter]:
    """The progress and result writer for ``config.exactly_once``."""
    if not config.exactly_once:
        results = AcknowledgedResults(source.producer, config.retry, tracing)
        return source.progress(config), results
    # Consumer checked at construction that the source declares transactions.
    transaction = cast(TransactionalSource, source).transaction()
    progress = TransactionalProgress(transaction, config.metadata_max_bytes)
    return progress, TransactionalResults(transaction, tracing)
