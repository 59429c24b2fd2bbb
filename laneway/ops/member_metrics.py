"""What ``laneway top`` reads from the members' Prometheus ``/metrics`` endpoints.

Only laneway's own metrics (:mod:`laneway.metrics`) are read, from the text format's
sample lines. Message keys are never metric labels, so the members cannot say which key
is hot; the nearest they tell is the partition whose oldest message has been in its
handler longest (``laneway_oldest_unfinished_seconds``), where a slow or stuck key holds
the commit point.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import SplitResult, urlsplit

from laneway.errors import ConfigError
from laneway.metrics import Metric
from laneway.types import PartitionId

SCRAPE_TIMEOUT = 2.0
"""Seconds to wait for one member's ``/metrics``."""
MAX_BYTES = 8 * 1024 * 1024
"""The most of one answer read (a laneway member's is a few kB)."""

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

COUNTERS = (Metric.MESSAGES_PROCESSED, Metric.MESSAGES_FAILED, Metric.DEAD_LETTERS)
GAUGES = (Metric.IN_FLIGHT, Metric.BUFFERED, Metric.PAUSED_PARTITIONS, Metric.STATE_RESTORING)
_HOT_ID = Metric.HOT_KEY_ID.value
_HOT_MESSAGES = Metric.HOT_KEY_MESSAGES.value


def check_url(url: str) -> str:
    """The metrics URL ``url`` names: ``http://`` is assumed when it has no scheme and
    ``/metrics`` when it has no path (``127.0.0.1:9108`` is
    ``http://127.0.0.1:9108/metrics``); anything but http(s) is a ConfigError naming
    ``--metrics``."""
    parts = http_address(
        url,
        "--metrics",
        "a member's metrics address, e.g. 127.0.0.1:9108/metrics (http unless it says https)",
    )
    full = parts.geturl()
    return full if parts.path not in ("", "/") else f"{parts.scheme}://{parts.netloc}/metrics"


def http_address(url: str, option: str, expected: str) -> SplitResult:
    """``url`` split, ``http://`` assumed when it has no scheme; anything but http(s) with a
    host is a ConfigError naming ``option`` and what is ``expected``."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{option} {url!r} is not valid; expected {expected}")
    return parts


@dataclass(frozen=True)
class MemberFigures:
    """The members' metrics at one moment, summed over the members that answered:
    ``totals`` of the counters and gauges (by metric), the oldest unfinished message's
    age per partition (the largest any member reports), and which URLs failed (why)."""

    answered: int
    totals: Mapping[Metric, float] = field(default_factory=dict)
    oldest: Mapping[PartitionId, float] = field(default_factory=dict)
    failures: Mapping[str, str] = field(default_factory=dict)
    waiting: Mapping[PartitionId, float] = field(default_factory=dict)
    """Per partition, the messages waiting for a stalled call (summed over members)."""
    hot_keys: tuple[tuple[int, float], ...] = ()
    """The hottest keys of every member, ``(key id, messages)``, most messages first."""
    restore_left: Mapping[PartitionId, float] = field(default_factory=dict)
    """Per partition whose state is being restored, the changelog records left to read
    (summed over members; partitions with none left are not listed)."""


def parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    """The samples of a Prometheus text exposition: ``(name, labels, value)``."""
    samples = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, labels, value = match.groups()
        try:
            number = float(value)
        except ValueError:
            continue
        samples.append((name, dict(_LABEL.findall(labels or "")), number))
    return samples


def scrape(urls: Iterable[str], timeout: float = SCRAPE_TIMEOUT) -> MemberFigures:
    """Read every member's metrics; a member that does not answer is listed in
    ``failures`` and left out of the sums."""
    totals: dict[Metric, float] = {}
    oldest: dict[PartitionId, float] = {}
    waiting: dict[PartitionId, float] = {}
    restore_left: dict[PartitionId, float] = {}
    hot: dict[int, float] = {}
    failures: dict[str, str] = {}
    answered = 0
    wanted = {metric.value: metric for metric in (*COUNTERS, *GAUGES)}
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                text = answer.read(MAX_BYTES).decode("utf-8", "replace")
        except (OSError, ValueError, urllib.error.URLError) as error:
            failures[url] = str(getattr(error, "reason", error))
            continue
        answered += 1
        samples = parse(text)
        _hot_keys(samples, hot)
        for name, labels, value in samples:
            metric = wanted.get(name)
            if metric is not None:
                totals[metric] = totals.get(metric, 0.0) + value
                continue
            pid = _partition(labels)
            if pid is None:
                continue
            if name == Metric.OLDEST_UNFINISHED.value:
                oldest[pid] = max(oldest.get(pid, 0.0), value)
            elif name == Metric.STALLED_WAITING.value:
                waiting[pid] = waiting.get(pid, 0.0) + value
            elif name == Metric.STATE_RESTORE_REMAINING.value and value > 0:
                restore_left[pid] = restore_left.get(pid, 0.0) + value
    hottest = tuple(sorted(hot.items(), key=lambda item: -item[1]))
    return MemberFigures(answered, totals, oldest, failures, waiting, hottest, restore_left)


def _hot_keys(samples: list[tuple[str, dict[str, str], float]], hot: dict[int, float]) -> None:
    """Add one member's hot keys (its ``laneway_hot_key_*`` gauges by rank) to ``hot``."""
    ids = {labels.get("rank"): value for name, labels, value in samples if name == _HOT_ID}
    for name, labels, value in samples:
        key = ids.get(labels.get("rank"))
        if name == _HOT_MESSAGES and key and value > 0:
            hot[int(key)] = hot.get(int(key), 0.0) + value


def _partition(labels: Mapping[str, str]) -> PartitionId | None:
    """The partition a sample's labels name, or ``None``."""
    if "topic" not in labels:
        return None
    try:
        return labels["topic"], int(labels.get("partition", ""))
    except ValueError:
        return None
