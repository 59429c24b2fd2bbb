"""Creating the async engine's own event loop: asyncio's, or uvloop when chosen or found."""

from __future__ import annotations

import asyncio
import importlib

from laneway.options import EventLoop, uvloop_installed


def resolve(choice: EventLoop) -> EventLoop:
    """The loop ``choice`` stands for here: ``auto`` becomes uvloop or asyncio."""
    if choice is EventLoop.AUTO:
        return EventLoop.UVLOOP if uvloop_installed() else EventLoop.ASYNCIO
    return choice


def new_event_loop(choice: EventLoop) -> asyncio.AbstractEventLoop:
    """A new, not yet running loop of the kind ``choice`` resolves to."""
    if resolve(choice) is EventLoop.UVLOOP:
        uvloop = importlib.import_module("uvloop")
        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        return loop
    return asyncio.new_event_loop()
