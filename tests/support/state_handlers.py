"""Stateful handlers for the state tests, importable by name from process-engine workers."""

from __future__ import annotations

import laneway


def count(message: laneway.Message, state: laneway.State[int]) -> None:
    """Each key's count of messages (``value`` says how many each adds)."""
    state.value = (state.value or 0) + int(message.value or b"1")


async def count_async(message: laneway.Message, state: laneway.State[int]) -> None:
    state.value = (state.value or 0) + int(message.value or b"1")


def count_batch(messages: list[laneway.Message], states: laneway.States) -> None:
    for message in messages:
        state = states[message]
        state.value = (state.value or 0) + int(message.value or b"1")


async def count_batch_async(messages: list[laneway.Message], states: laneway.States) -> None:
    count_batch(messages, states)


def delete_at_zero(message: laneway.Message, state: laneway.State[int]) -> None:
    """Adds ``value`` (may be negative); a key whose count reaches 0 is deleted."""
    total = (state.value or 0) + int(message.value or b"0")
    if total:
        state.value = total
    else:
        del state.value


HANDLERS = {
    ("sync", False): count,
    ("thread", False): count,
    ("process", False): count,
    ("async", False): count_async,
    ("sync", True): count_batch,
    ("thread", True): count_batch,
    ("process", True): count_batch,
    ("async", True): count_batch_async,
}
"""The counting handler for each engine, plain or batched."""
