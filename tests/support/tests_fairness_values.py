"""A Fairness and a priority function importable by name, as `laneway run --fairness
MODULE:ATTR --priority MODULE:ATTR` names them."""

from __future__ import annotations

import laneway


def tenant(message: laneway.Message) -> bytes:
    return (message.key or b"").split(b"-")[0]


def urgency(message: laneway.Message) -> int:
    return 9 if (message.key or b"").startswith(b"urgent") else 0


FAIRNESS = laneway.Fairness(group_by=tenant, weights={b"gold": 3.0}, max_in_flight=16)
