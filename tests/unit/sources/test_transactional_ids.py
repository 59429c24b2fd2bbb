"""Which ``transactional.id`` an exactly-once member gets, and which settings go where."""

from __future__ import annotations

import socket

import pytest

from laneway.errors import ConfigError
from laneway.sources.kafka.transactions import (
    EXACTLY_ONCE_DEFAULTS,
    check_isolation,
    member_transactional_id,
    transaction_settings,
    transactional_id,
)


def test_a_supervised_member_keeps_its_slot_s_id_across_restarts() -> None:
    host = socket.gethostname()
    assert member_transactional_id("billing", 0, None) == f"laneway-billing-{host}-member-0"
    assert member_transactional_id("billing", 1, None) == f"laneway-billing-{host}-member-1"
    assert member_transactional_id("billing", 1, None) == member_transactional_id(
        "billing", 1, None
    ), "the same slot, the same id: a restart fences the member it replaces"


def test_a_given_id_is_used_as_it_is_alone_and_with_the_index_under_members() -> None:
    assert member_transactional_id("billing", None, "pod-7") == "pod-7"
    assert member_transactional_id("billing", 0, "pod-7") == "pod-7-0"
    assert member_transactional_id("billing", 3, "pod-7") == "pod-7-3"


def test_a_single_process_without_a_given_id_keeps_the_library_default() -> None:
    assert member_transactional_id("billing", None, None) is None
    assert transactional_id("billing", "static-a") == "laneway-billing-static-a"
    assert transactional_id("billing", None).startswith(f"laneway-billing-{socket.gethostname()}-")


def test_the_transaction_timeout_is_ten_seconds_unless_the_user_sets_it() -> None:
    assert EXACTLY_ONCE_DEFAULTS == {"transaction.timeout.ms": 10_000}
    consumer = {"group.id": "g", "transaction.timeout.ms": 30_000, "fetch.wait.max.ms": 20}
    assert transaction_settings(consumer) == {"transaction.timeout.ms": 30_000}
    assert consumer == {"group.id": "g", "fetch.wait.max.ms": 20}, "not a consumer setting"
    assert transaction_settings({"group.id": "g"}) == {}


@pytest.mark.parametrize("level", ["read_uncommitted", "READ_UNCOMMITTED", " read_uncommitted"])
def test_read_uncommitted_is_refused_naming_the_setting(level: str) -> None:
    with pytest.raises(ConfigError, match=r"isolation.level.*exactly_once=True.*aborted"):
        check_isolation({"isolation.level": level})


def test_read_committed_explicit_or_implied_is_accepted() -> None:
    check_isolation({})
    check_isolation({"isolation.level": "read_committed"})
