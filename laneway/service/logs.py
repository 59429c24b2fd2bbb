"""Logging for ``laneway run``: a level and a format (text or one JSON object per line)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

EXTRA_FIELDS = ("topic", "partition", "offset", "member")
"""Record attributes copied into JSON lines (and shown in text ones) when present."""


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time`` (UTC, ISO 8601), ``level``, ``logger``,
    ``message``, the position fields of :data:`EXTRA_FIELDS` when the record has them, and
    ``exception`` (the formatted traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in EXTRA_FIELDS:
            if hasattr(record, name):
                line[name] = getattr(record, name)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    """``time level logger: message [topic[partition]@offset]``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        member = getattr(record, "member", None)
        return text if member is None else f"[member {member}] {text}"


class MemberFilter(logging.Filter):
    """Stamps every record with the member index (``--members``)."""

    def __init__(self, member: int) -> None:
        super().__init__()
        self._member = member

    def filter(self, record: logging.LogRecord) -> bool:
        record.member = self._member
        return True


def configure(level: str, fmt: str, member: int | None = None) -> None:
    """Send every log record (laneway's, librdkafka's through it, the handler's) to
    stderr at ``level`` in format ``fmt`` (``text`` or ``json``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    if member is not None:
        handler.addFilter(MemberFilter(member))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
