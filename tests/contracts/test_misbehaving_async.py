"""The async engine against hung, slow, bursty and skewed handlers (see
``support/misbehaving_contract.py``)."""

from __future__ import annotations

from misbehaving_contract import MisbehavingHandlers


class TestAsyncEngine(MisbehavingHandlers):
    engine = "async"
    concurrencies = (4, 64)
