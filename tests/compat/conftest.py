"""The compatibility suite's broker: another Kafka version, with Kafka's own server defaults.

`make test-compat` runs tests/compat once per version of ``COMPAT_VERSIONS`` (the Makefile),
each on ``scripts/with-services kafka@VERSION-defaults``: ``scripts/kafka start --version V
--defaults``, a single node where topics are auto-created (``num.partitions=1``), group joins
wait out the 3 s ``group.initial.rebalance.delay.ms``, and the group protocols and feature
levels are that release's own. The tests do what a new user does, with laneway's default
options; each says which behaviour differs by version.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class CompatBroker:
    """The broker of this run: its address, its Kafka release and whether it runs Kafka's
    own server defaults."""

    bootstrap: str
    version: str
    defaults: bool

    def at_least(self, *version: int) -> bool:
        return tuple(int(part) for part in self.version.split(".")) >= version

    @property
    def has_kip848(self) -> bool:
        """Whether the broker serves KIP-848's consumer group protocol (Kafka 4.0 on)."""
        return self.at_least(4, 0)

    @property
    def has_share_groups(self) -> bool:
        """Whether share groups (KIP-932) are on by default (Kafka 4.2 on; 4.1 had a preview
        off by default)."""
        return self.at_least(4, 2)


@pytest.fixture(scope="session")
def compat_broker() -> CompatBroker:
    bootstrap = os.environ.get("LANEWAY_BROKER", "").strip()
    version = os.environ.get("LANEWAY_BROKER_VERSION", "").strip()
    if not bootstrap or not version:
        pytest.fail(
            "the compatibility suite runs on a broker that scripts/with-services "
            "kafka@VERSION-defaults starts (it sets LANEWAY_BROKER_VERSION): make test-compat",
            pytrace=False,
        )
    return CompatBroker(bootstrap, version, os.environ.get("LANEWAY_BROKER_DEFAULTS") == "1")
