"""The process engine against hung, slow, bursty and skewed handlers (see
``support/misbehaving_contract.py``): a worker stuck in one call is detached after
``DETACH_AFTER`` and its slot's other lanes go on in a fresh worker."""

from __future__ import annotations

from misbehaving_contract import MisbehavingHandlers


class TestProcessEngine(MisbehavingHandlers):
    engine = "process"
    concurrencies = (2, 4)
    slow_ms = 50.0
    burst = (4, 1500.0)
