"""The handler of a failover run with results: record the call, then return one result
naming the input (``partition:offset``) for the topic in ``LANEWAY_FAILOVER_OUT`` (read
by name, so that process-engine workers import it)."""

from __future__ import annotations

import os

import recording

import laneway

OUT = "LANEWAY_FAILOVER_OUT"


def handle(message: laneway.Message) -> laneway.Produce:
    recording.handle(message)
    value = f"{message.partition}:{message.offset}".encode()
    return laneway.Produce(os.environ[OUT], value, message.key)
