"""What a source can do is declared once (its SourceCapabilities) and checked once, when a
Consumer is made: every member of the Source protocol, and the members of every ability it
declares."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import laneway
from laneway.config import ConsumerConfig
from laneway.errors import ConfigError
from laneway.sources.base import PrefetchingSource, Source, SourceCapabilities, TransactionalSource
from laneway.sources.capabilities import PARTITIONED_LOG, check_source
from laneway.sources.embedded.source import EMBEDDED_LOG, EmbeddedSource
from laneway.sources.kafka.source import KAFKA_GROUP
from laneway.sources.share.source import SHARE_GROUP


def members(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")}


def source_with(capabilities: Any, *, leave_out: str = "", add: tuple[str, ...] = ()) -> object:
    """An object of a class with every Source member but ``leave_out``, plus ``add``."""
    body: dict[str, Any] = {name: (lambda self, *args: None) for name in members(Source) | set(add)}
    body["capabilities"] = capabilities
    body.pop(leave_out, None)
    return type("Handmade", (), body)()


@pytest.mark.parametrize("member", sorted(members(Source)))
def test_every_member_of_the_protocol_is_required(member: str) -> None:
    with pytest.raises(ConfigError, match=f"missing {member}"):
        check_source(source_with(PARTITIONED_LOG, leave_out=member), ConsumerConfig())


def test_a_source_with_every_member_passes_and_its_capabilities_come_back() -> None:
    assert check_source(source_with(PARTITIONED_LOG), ConsumerConfig()) is PARTITIONED_LOG


@pytest.mark.parametrize(
    ("ability", "protocol"),
    [("transactions", TransactionalSource), ("prefetches", PrefetchingSource)],
)
def test_a_declared_ability_needs_its_members(ability: str, protocol: type) -> None:
    declared = dataclasses.replace(PARTITIONED_LOG, **{ability: True})
    (member,) = members(protocol)
    with pytest.raises(ConfigError, match=f"declares {ability} but has no {member}"):
        check_source(source_with(declared), ConsumerConfig())
    assert check_source(source_with(declared, add=(member,)), ConsumerConfig()) is declared


def test_capabilities_must_be_declared_as_such() -> None:
    with pytest.raises(ConfigError, match="not a SourceCapabilities"):
        check_source(source_with({"pauses": True}), ConsumerConfig())


def test_exactly_once_follows_the_declaration() -> None:
    config = ConsumerConfig.from_options({"exactly_once": True})
    with pytest.raises(ConfigError, match="exactly_once=True is not valid"):
        check_source(source_with(PARTITIONED_LOG, add=("transaction",)), config)
    transactional = dataclasses.replace(PARTITIONED_LOG, transactions=True)
    assert check_source(source_with(transactional, add=("transaction",)), config)


@pytest.mark.parametrize(
    ("source_class", "declared"),
    [
        (laneway.KafkaSource, KAFKA_GROUP),
        (EmbeddedSource, EMBEDDED_LOG),
        (laneway.KafkaShareSource, SHARE_GROUP),
    ],
)
def test_laneways_sources_have_what_they_declare(
    source_class: type, declared: SourceCapabilities
) -> None:
    for ability, protocol in (
        ("transactions", TransactionalSource),
        ("prefetches", PrefetchingSource),
    ):
        has = all(hasattr(source_class, member) for member in members(protocol))
        assert getattr(declared, ability) == has, f"{source_class.__name__}: {ability}"
    assert all(hasattr(source_class, member) for member in members(Source))
