"""check_changelog: a changelog of the wrong shape is mended while it holds no record, and
refused with the command that mends it once it does (a fake log: the real brokers are in
tests/integration/test_changelog_shape.py and tests/compat)."""

from __future__ import annotations

import logging

import pytest

from laneway.errors import ConfigError
from laneway.state.changelog import check_changelog


class FakeLog:
    where = "the test log"

    def __init__(self, topics: dict[str, int], records: int = 0, compacted: bool = True) -> None:
        self.topics = dict(topics)
        self.records = records
        self.is_compacted = compacted
        self.mended: list[tuple[str, int | None]] = []

    def partitions(self, topic: str) -> int | None:
        return self.topics.get(topic)

    def compacted(self, topic: str) -> bool | None:
        return self.is_compacted

    def create(self, topic: str, partitions: int) -> None:
        self.topics[topic] = partitions

    def empty(self, topic: str) -> bool:
        return self.records == 0

    def mend(self, topic: str, partitions: int | None) -> bool:
        self.mended.append((topic, partitions))
        if partitions is not None:
            self.topics[topic] = partitions
        self.is_compacted = True
        return True

    def mending(self, topic: str, partitions: int | None) -> str:
        return f"MEND {topic} {partitions}"


def test_a_missing_changelog_is_created_like_its_input() -> None:
    log = FakeLog({"in": 4})
    assert check_changelog(log, "in.state", "in", create=True) == 4  # type: ignore[arg-type]
    assert log.topics["in.state"] == 4


def test_an_empty_one_partition_changelog_is_mended_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = FakeLog({"in": 4, "in.state": 1}, compacted=False)
    with caplog.at_level(logging.WARNING):
        assert check_changelog(log, "in.state", "in", create=True) == 4  # type: ignore[arg-type]
    assert log.mended == [("in.state", 4)]
    message = caplog.records[-1].getMessage()
    assert "has 1 partitions instead of its input's 4" in message
    assert "is not compacted" in message and "mended" in message


def test_a_changelog_with_records_and_the_wrong_shape_is_refused_with_the_command() -> None:
    log = FakeLog({"in": 4, "in.state": 1}, records=3)
    with pytest.raises(
        ConfigError, match=r"has 1 partitions instead of its input's 4.*MEND in.state 4"
    ):
        check_changelog(log, "in.state", "in", create=True)  # type: ignore[arg-type]
    assert log.mended == []


def test_an_uncompacted_changelog_with_records_is_refused() -> None:
    log = FakeLog({"in": 2, "in.state": 2}, records=3, compacted=False)
    with pytest.raises(ConfigError, match=r"is not compacted.*MEND in.state None"):
        check_changelog(log, "in.state", "in", create=True)  # type: ignore[arg-type]


def test_more_partitions_than_the_input_is_refused_even_when_empty() -> None:
    log = FakeLog({"in": 2, "in.state": 4})
    with pytest.raises(ConfigError, match="partitions cannot be removed"):
        check_changelog(log, "in.state", "in", create=True)  # type: ignore[arg-type]
    assert log.mended == []
