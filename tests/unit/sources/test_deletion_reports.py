"""DeletedRecords: librdkafka's reset line noticed, the loss reported with the log start
and counted; a committed offset below the log start refused at assignment."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import TopicPartition

from laneway.sources.kafka.deleted_records import DeletedRecords

RESET = (
    "[thrd:main]: orders [3]: offset reset (at offset 988 (leader epoch 0), broker 1) to "
    "offset BEGINNING (leader epoch -1): fetch failed due to requested offset not available "
    "on the broker: Broker: Offset out of range"
)


class Watermarks:
    def __init__(self, start: int, end: int) -> None:
        self.bounds = (start, end)

    def get_watermark_offsets(
        self, tp: TopicPartition, timeout: float, cached: bool
    ) -> tuple[int, int]:
        assert not cached
        return self.bounds


def counted(records: DeletedRecords) -> dict[tuple[str, int], int]:
    lost: dict[tuple[str, int], int] = {}

    def count(pid: tuple[str, int], offset: int, start: int) -> int:
        lost[pid] = lost.get(pid, 0) + start - offset
        return start - offset

    records.deleted = count
    return lost


def test_a_reset_to_the_beginning_reports_the_records_never_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    records = DeletedRecords("src", "earliest")
    lost = counted(records)
    with caplog.at_level(logging.DEBUG):
        records.log(logging.WARNING, "%s [%s] %s", "OFFSET", "rdkafka#consumer-1", RESET)
        records.report(Watermarks(2000, 5000), {("orders", 3)})  # type: ignore[arg-type]
    assert lost == {("orders", 3): 1012}
    ours = [r.getMessage() for r in caplog.records if r.name == "laneway.sources.kafka.source"]
    assert len(ours) == 1
    assert "orders[3]" in ours[0] and "offset 988" in ours[0] and "log start is 2000" in ours[0]
    assert "auto.offset.reset=earliest" in ours[0] and "1012 record(s)" in ours[0]
    assert any(r.name == "laneway.librdkafka" for r in caplog.records)  # its own line too


def test_a_reset_to_the_end_counts_up_to_the_end() -> None:
    records = DeletedRecords("src", "latest")
    lost = counted(records)
    line = RESET.replace("BEGINNING", "END")
    records.log(logging.WARNING, "%s [%s] %s", "OFFSET", "rdkafka#consumer-1", line)
    records.report(Watermarks(2000, 5000), {("orders", 3)})  # type: ignore[arg-type]
    assert lost == {("orders", 3): 5000 - 988}


def test_a_position_beyond_the_end_loses_nothing_and_partitions_not_owned_are_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    records = DeletedRecords("src", "earliest")
    lost = counted(records)
    records.log(logging.WARNING, "%s [%s] %s", "OFFSET", "x", RESET)
    records.report(Watermarks(0, 500), {("orders", 3)})  # type: ignore[arg-type]
    assert lost == {}
    assert "beyond the log end 500" in caplog.records[-1].getMessage()
    records.log(logging.WARNING, "%s [%s] %s", "OFFSET", "x", RESET)
    records.report(Watermarks(2000, 5000), set())  # type: ignore[arg-type]
    assert lost == {}


def test_other_lines_pass_through_untouched() -> None:
    records = DeletedRecords("src", "earliest")
    lost = counted(records)
    records.log(logging.INFO, "%s [%s] %s", "FETCH", "x", RESET)
    records.log(logging.INFO, "%s [%s] %s", "OFFSET", "x", "[thrd:main]: orders [3]: stored")
    records.report(Watermarks(2000, 5000), {("orders", 3)})  # type: ignore[arg-type]
    assert lost == {}


def test_a_committed_offset_below_the_log_start_is_refused_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    records = DeletedRecords("src", "earliest")
    lost = counted(records)
    assert records.checked_start("src: orders[1]", ("orders", 1), 50, 50)
    assert not records.checked_start("src: orders[1]", ("orders", 1), 5, 50)
    assert lost == {("orders", 1): 45}
    assert "committed offset 5 is below the log start 50" in caplog.records[-1].getMessage()
