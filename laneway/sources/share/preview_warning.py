"""The share consumer's Preview warning: logged once per process tree, not per client.

librdkafka warns that its share consumer is a Preview each time one is created, and
``laneway run --share --members N`` creates one per member (and again per restart). The
warning is worth one line per run: a filter on laneway's librdkafka logger lets it
through once per process, and the supervisor tells the members it starts that it was
logged already (:data:`PREVIEW_WARNED`).
"""

from __future__ import annotations

import logging
import os

from laneway.sources.kafka.client_logs import LIBRDKAFKA_LOGGER

PREVIEW_WARNED = "LANEWAY_SHARE_PREVIEW_WARNED"
"""Set (to ``1``) in the environment of the processes ``laneway run --members`` starts once
its own process logged librdkafka's warning that the share consumer is a Preview, so the
members do not repeat it: once per process tree (see :func:`preview_warned`). A process
started with it set never logs the warning."""
_PREVIEW = 'The share consumer is in "Preview"'


class _PreviewOnce(logging.Filter):
    """Lets librdkafka's Preview warning through once per process (none when the process
    inherited :data:`PREVIEW_WARNED`); every other line passes."""

    def __init__(self) -> None:
        super().__init__()
        self.warned = os.environ.get(PREVIEW_WARNED) == "1"

    def filter(self, record: logging.LogRecord) -> bool:
        if _PREVIEW not in record.getMessage():
            return True
        if self.warned:
            return False
        self.warned = True
        return True


_PREVIEW_ONCE = _PreviewOnce()


def install_preview_filter() -> None:
    """Let the Preview warning through once per process: every KafkaShareSource calls it
    before it creates its client (adding the same filter again changes nothing)."""
    LIBRDKAFKA_LOGGER.addFilter(_PREVIEW_ONCE)


def preview_warned() -> bool:
    """Whether this process logged the share consumer's Preview warning (or inherited
    :data:`PREVIEW_WARNED`): a process that starts others passes the variable on to them.
    The process's own environment is left alone, so an application's other children
    still warn."""
    return _PREVIEW_ONCE.warned
