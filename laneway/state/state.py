"""State: the value a stateful handler reads and changes for its message's key."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class State(Generic[T]):
    """The state of one key, handed to a stateful handler as its second argument.

    ``state.value`` is the key's value (``None`` for a key seen first); assign to change it,
    ``del state.value`` (or assign ``None``) to delete it. Only an assignment counts as a
    change: a value changed in place (``state.value["n"] += 1`` on a dict) must be assigned
    back (``state.value = d``) to be kept. Changes are kept only when the handler returns:
    an attempt that raises leaves the state as it was for the retry.

    Keys are the message's key bytes; keyless messages share their partition's keyless
    state (see :class:`~laneway.state.store.StateStore`). Tuning: none; a ``State`` is
    made per message and costs a few hundred nanoseconds with its read and write.
    """

    __slots__ = ("_value", "changed")

    def __init__(self, value: T | None = None) -> None:
        self._value = value
        self.changed = False
        """Whether the handler assigned or deleted the value."""

    @property
    def value(self) -> T | None:
        """The key's value, ``None`` when it has none."""
        return self._value

    @value.setter
    def value(self, value: T | None) -> None:
        self._value = value
        self.changed = True

    @value.deleter
    def value(self) -> None:
        self._value = None
        self.changed = True

    def __repr__(self) -> str:
        return f"State({self._value!r:.80})"
