"""GroupStatus: the status of a whole group, for ``laneway status``: Kafka's view of every
partition (as ``laneway lag`` reads it) joined with each member's ``/status.json``."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from laneway import __version__
from laneway.errors import ConfigError, LanewayError, SourceError
from laneway.ops.cluster import GroupReader, Snapshot
from laneway.ops.group_document import joined
from laneway.ops.member_metrics import http_address
from laneway.sources.targets import Target
from laneway.status.entries import KEY_FIELDS

FETCH_TIMEOUT = 1.5
"""Seconds to wait for one member's ``/status.json``."""
MAX_BYTES = 4 * 1024 * 1024
"""The most of one member's answer read (a member's is tens of kB)."""
KEPT = 150
"""Samples kept: the chart's span is this many sampling intervals."""
HELD_NOTE = (
    "the log directory is open in a running process (an embedded log belongs to one "
    "process at a time): partitions as its members report them"
)


def member_url(url: str) -> str:
    """The status URL ``url`` names: ``http://`` when it has no scheme, ``/status.json``
    when it has no path or ends in ``/status``; anything but http(s) is a ConfigError
    naming ``--member``."""
    parts = http_address(
        url,
        "--member",
        "a member's health address, e.g. 127.0.0.1:8080 (http and /status.json unless given)",
    )
    path = parts.path.rstrip("/")
    if path in ("", "/status"):
        path = "/status.json"
    return f"{parts.scheme}://{parts.netloc}{path}"


def service_urls(service: str) -> list[str]:
    """Every member behind ``service`` (``NAME:PORT``, e.g. a Kubernetes headless
    service, which resolves to one address per ready pod), resolved now."""
    name, _, port = service.rpartition(":")
    if not name or not port.isdigit():
        raise ConfigError(
            f"--member-service {service!r} is not valid; expected NAME:PORT, e.g. "
            "billing-members.default.svc.cluster.local:8080"
        )
    try:
        found = socket.getaddrinfo(name, int(port), type=socket.SOCK_STREAM)
    except OSError:
        return []
    hosts = sorted({str(info[4][0]) for info in found})
    return [f"http://{f'[{h}]' if ':' in h else h}:{port}/status.json" for h in hosts]


def fetch(url: str, timeout: float = FETCH_TIMEOUT) -> dict[str, Any]:
    """One member's status document, or ``{"error": why}``."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            document = json.loads(answer.read(MAX_BYTES))
    except (OSError, ValueError, urllib.error.URLError) as error:
        return {"error": str(getattr(error, "reason", error))}
    if not isinstance(document, dict) or document.get("kind") != "member":
        return {"error": "not a laneway status document"}
    return document


def without_keys(value: Any) -> Any:
    """``value`` (from a member: not trusted) without any message key in it."""
    if isinstance(value, dict):
        return {
            k: without_keys(v)
            for k, v in value.items()
            if k not in KEY_FIELDS and k != "blocking_key"
        }
    if isinstance(value, list):
        return [without_keys(v) for v in value]
    return value


@dataclass(frozen=True)
class Members:
    """Where the members are: ``urls`` given, and ``services`` to resolve each time."""

    urls: Sequence[str]
    services: Sequence[str] = ()

    def resolve(self) -> list[str]:
        found = list(self.urls)
        for service in self.services:
            found += [url for url in service_urls(service) if url not in found]
        return found


class GroupStatus:
    """Samples a group every ``interval`` seconds from a thread of its own: a snapshot of
    its committed positions and log ends (``laneway lag``'s reader, opened for each sample
    on an embedded log so that its directory stays free for the consumer) and every
    member's status; :meth:`document` is the latest join, for ``GET /status.json``.

    A member that does not answer is listed with the reason. Keys are left out of what
    members send unless ``show_keys``. Reading is safe from any thread.
    """

    def __init__(
        self,
        target: Target,
        group: str,
        topics: Sequence[str],
        members: Members,
        *,
        show_keys: bool = False,
        interval: float = 2.0,
    ) -> None:
        self._target = target
        self._group = group
        self._topics = topics
        self._members = members
        self._show_keys = show_keys
        self.interval = interval
        self._reader: GroupReader | None = None
        self._snapshots: deque[Snapshot] = deque(maxlen=KEPT)
        self._pool = ThreadPoolExecutor(8, thread_name_prefix="laneway-status-fetch")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._latest: dict[str, Any] = joined(group, target.where, [], [])

    def start(self) -> None:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="laneway-group-status", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10.0)
        self._pool.shutdown(wait=False)
        if self._reader is not None:
            self._reader.close()

    def document(self) -> dict[str, Any]:
        return self._latest

    def sample(self) -> dict[str, Any]:
        """Read the group and its members now; keep and return the joined document."""
        urls = self._members.resolve()
        answers = self._pool.map(fetch, urls)
        members = [
            (url, a if self._show_keys else without_keys(a))
            for url, a in zip(urls, answers, strict=True)
        ]
        error = note = ""
        try:
            self._snapshots.append(self._snapshot())
        except LanewayError as failure:
            if self._target.log_dir is not None and isinstance(failure.__cause__, SourceError):
                note = HELD_NOTE  # another process has the log open: the consumer, likely
            else:
                error = f"cannot read the group: {failure}"
        self._latest = joined(
            self._group, self._target.where, list(self._snapshots), members, note, error
        )
        self._latest["version"] = __version__
        return self._latest

    def _snapshot(self) -> Snapshot:
        if self._target.log_dir is not None:  # open it only while reading: a consumer needs it
            reader = GroupReader(self._target, self._group, self._topics)
            try:
                return reader.snapshot()
            finally:
                reader.close()
        if self._reader is None:
            self._reader = GroupReader(self._target, self._group, self._topics)
        return self._reader.snapshot()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):  # one bad sample must not end the page
                self.sample()
