"""Every engine against the Engine protocol's promises (see ``support/engine_contract.py``)."""

from __future__ import annotations

from engine_contract import BoundedClose, EngineContract, IndependentLanes


class TestSyncEngine(EngineContract):
    engine = "sync"
    concurrency = None


class TestThreadEngine(IndependentLanes, BoundedClose):
    engine = "thread"


class TestAsyncEngine(IndependentLanes, BoundedClose):
    engine = "async"


class TestProcessEngine(BoundedClose):
    """Lanes pinned to one worker run one after another: a slow key delays the keys that
    share its worker until it is detached (after DETACH_AFTER; the bound is checked by
    test_misbehaving_process.py, not by IndependentLanes' one second)."""

    engine = "process"
    concurrency = 2
