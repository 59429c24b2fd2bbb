"""What ``laneway top`` reads from members' /metrics (real laneway Prometheus endpoints on
loopback), and the plain tables the ops commands print."""

from __future__ import annotations

import socket

import pytest

from laneway.errors import ConfigError
from laneway.metrics import Metric
from laneway.observability.prometheus import PrometheusMetrics
from laneway.ops.member_metrics import check_url, parse, scrape
from laneway.ops.tables import render


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_members_are_summed_and_the_oldest_message_is_the_largest_age() -> None:
    urls = []
    for processed, dead, oldest in ((100, 2, 0.5), (50, 1, 7.25)):
        member = PrometheusMetrics()
        member.increment(Metric.MESSAGES_PROCESSED, processed, ("orders",))
        member.increment(Metric.DEAD_LETTERS, dead, ("orders",))
        member.gauge(Metric.IN_FLIGHT, 3)
        member.gauge(Metric.OLDEST_UNFINISHED, oldest, ("orders", "1"))
        urls.append(f"http://127.0.0.1:{member.serve(0)}/metrics")
    gone = f"http://127.0.0.1:{closed_port()}/metrics"
    figures = scrape([*urls, gone], timeout=2.0)
    assert figures.answered == 2
    assert figures.totals[Metric.MESSAGES_PROCESSED] == 150
    assert figures.totals[Metric.DEAD_LETTERS] == 3
    assert figures.totals[Metric.IN_FLIGHT] == 6
    assert figures.oldest == {("orders", 1): 7.25}
    assert list(figures.failures) == [gone]


def test_label_values_with_quotes_and_odd_lines_are_read() -> None:
    text = (
        "# HELP x y\n"
        'laneway_oldest_unfinished_seconds{topic="a\\"b",partition="2"} 4.5\n'
        "garbage line\n"
        "laneway_in_flight NaN\n"
    )
    samples = parse(text)
    assert samples[0] == (
        "laneway_oldest_unfinished_seconds",
        {"topic": 'a\\"b', "partition": "2"},
        4.5,
    )
    assert samples[1][0] == "laneway_in_flight"


@pytest.mark.parametrize("url", ["file:///etc/passwd", "http://", "ftp://host/metrics", ":80"])
def test_a_metrics_url_must_be_http(url: str) -> None:
    with pytest.raises(ConfigError, match=r"--metrics .* is not valid"):
        check_url(url)


def test_a_metrics_address_is_http_and_metrics_by_default() -> None:
    assert check_url("127.0.0.1:9108") == "http://127.0.0.1:9108/metrics"
    assert check_url("member-0:9108/") == "http://member-0:9108/metrics"
    assert check_url("https://member-1:9108/m") == "https://member-1:9108/m"


def test_tables_align_numbers_right_and_text_left() -> None:
    table = render(("topic", "lag"), [["orders", 5], ["payments-eu", 1234], ["total", None]])
    assert table.splitlines() == [
        "topic         lag",
        "orders          5",
        "payments-eu  1234",
        "total           -",
    ]


def test_hot_keys_come_by_rank_as_ids_and_the_members_are_merged() -> None:
    """Each member reports its ten hottest keys by rank, each as an id (a hash) and a count;
    laneway top merges them: the same key on two members is one entry."""
    from laneway.control.tally import key_id

    urls = []
    for pairs in ([(b"acct-1", 40), (b"acct-2", 9)], [(b"acct-1", 5), (b"acct-3", 30)]):
        member = PrometheusMetrics()
        for rank, (key, count) in enumerate(pairs, 1):
            member.gauge(Metric.HOT_KEY_MESSAGES, count, (str(rank),))
            member.gauge(Metric.HOT_KEY_ID, key_id(key), (str(rank),))
        member.gauge(Metric.HOT_KEY_MESSAGES, 0, ("3",))
        member.gauge(Metric.HOT_KEY_ID, 0, ("3",))
        urls.append(f"http://127.0.0.1:{member.serve(0)}/metrics")
    figures = scrape(urls, timeout=2.0)
    assert figures.hot_keys == (
        (key_id(b"acct-1"), 45.0),
        (key_id(b"acct-3"), 30.0),
        (key_id(b"acct-2"), 9.0),
    )
    text = " ".join(str(part) for part in figures.hot_keys)
    assert "acct" not in text


def test_restoring_partitions_show_with_the_records_left() -> None:
    """A member restoring a partition's state says so in its gauges; laneway top sums the
    members and lists each restoring partition with the changelog records left."""
    from laneway.offsets.backlog import GroupBacklog
    from laneway.ops.cluster import Snapshot
    from laneway.ops.top.view import Drain, View, members_line

    urls = []
    for left in ((("orders", "1"), 41_250), (("orders", "3"), 7)):
        member = PrometheusMetrics()
        member.gauge(Metric.STATE_RESTORING, 1)
        member.gauge(Metric.STATE_RESTORE_REMAINING, left[1], left[0])
        member.gauge(Metric.STATE_RESTORE_REMAINING, 0, ("orders", "0"))  # restored
        urls.append(f"http://127.0.0.1:{member.serve(0)}/metrics")
    figures = scrape(urls, timeout=2.0)
    assert figures.totals[Metric.STATE_RESTORING] == 2
    assert figures.restore_left == {("orders", 1): 41_250, ("orders", 3): 7}
    snapshot = Snapshot("billing", GroupBacklog(()), 0.0)
    later = Snapshot("billing", GroupBacklog(()), 1.0)
    view = View(snapshot, later, figures, figures, Drain().add(snapshot))
    assert "restoring state: 2 partitions (records left: orders[1] 41,250, orders[3] 7)" in (
        members_line(view, 2)
    )
    idle = PrometheusMetrics()
    idle.gauge(Metric.STATE_RESTORING, 0)
    quiet = scrape([f"http://127.0.0.1:{idle.serve(0)}/metrics"], timeout=2.0)
    assert "restoring" not in members_line(View(snapshot, later, quiet, quiet, Drain()), 1)
