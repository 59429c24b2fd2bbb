"""Logging for ``laneway run``: a level and a format (text or one JSON object per line),
and the start-up hold that keeps a failed start to its one-line error."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Iterable
from datetime import datetime, timezone

from laneway.printable import PrintableFormatter

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


class TextFormatter(PrintableFormatter):
    """``time level logger: message [topic[partition]@offset]``, made printable (see
    :class:`~laneway.printable.PrintableFormatter`: a key or a broker's text in a message
    cannot act on the terminal it is read in)."""

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


HELD_LOGGERS = ("laneway.kafka", "laneway.librdkafka", "laneway.service")
"""The loggers whose start-up lines are held: the Kafka clients' and the service's."""
MOST_HELD = 200
"""Start-up lines held at most before all are written anyway."""


class StartUpHold(logging.Filter):
    """Holds the log records of a start-up until it is over, so that a start that fails
    prints only ``laneway run: error: <cause>``: while no broker answers, the Kafka
    clients log every refused connection (the error names the last one), and "consuming
    ..." would announce a run that never happens.

    Only the lines of :data:`HELD_LOGGERS` are held (a handler's own ``open()`` logs
    as it goes), at most :data:`MOST_HELD` of them: past that, the start is taking long
    enough to be worth watching, and everything is released. A line that is not held
    writes the held ones before it, so the output stays in time order (holding goes on).
    :meth:`release` writes what was held, in order, and lets everything through from then
    on (the consumer runs, or the failure was unexpected and its traceback needs the
    context); :meth:`discard` drops it (the one-line error says why). At ``debug`` level
    nothing is held. Thread-safe.
    """

    def __init__(self, handler: logging.Handler, hold: bool = True) -> None:
        super().__init__()
        self._handler = handler
        self._lock = threading.RLock()
        self._held: list[logging.LogRecord] | None = [] if hold else None
        self._writing = False

    def filter(self, record: logging.LogRecord) -> bool:
        with self._lock:
            if self._held is None or self._writing:
                return True
            if not record.name.startswith(HELD_LOGGERS):
                self._write_held()
                return True
            self._held.append(record)
            if len(self._held) > MOST_HELD:
                self.release()
            return False

    def _write_held(self) -> None:
        """Write the records held so far (and hold on)."""
        held, self._held = self._held or [], []
        self._writing = True
        try:
            for record in held:
                self._handler.handle(record)
        finally:
            self._writing = False

    def release(self) -> None:
        """Write the held records and hold nothing more."""
        with self._lock:
            held, self._held = self._held or [], None
        for record in held:
            self._handler.handle(record)

    def discard(self) -> None:
        """Drop the held records and hold nothing more."""
        with self._lock:
            self._held = None


class SecretFilter(logging.Filter):
    """Writes ``***`` for every secret value of the librdkafka settings (see
    :meth:`~laneway.service.kafka_settings.KafkaClientSettings.secrets`) that a line or
    its traceback holds: librdkafka echoes some back in its errors (an unrecognised
    ``sasl.oauthbearer.config``, say)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = list(secrets)

    def scrub(self, text: str) -> str:
        """``text`` with every secret value replaced by ``***``."""
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        message = record.getMessage()
        clean = self.scrub(message)
        if clean != message:
            record.msg, record.args = clean, ()
        if record.exc_info:
            record.exc_text = self.scrub(logging.Formatter().formatException(record.exc_info))
        return True


_hold: StartUpHold | None = None
_secrets = SecretFilter()


def configure(
    level: str, fmt: str, member: int | None = None, secrets: Iterable[str] = ()
) -> StartUpHold:
    """Send every log record (laneway's, librdkafka's through it, the handler's) to
    stderr at ``level`` in format ``fmt`` (``text`` or ``json``), with ``secrets``
    written as ``***`` and held back until the start-up is over (see
    :class:`StartUpHold`, returned)."""
    global _hold
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    _secrets.secrets = list(secrets)
    handler.addFilter(_secrets)
    if member is not None:
        handler.addFilter(MemberFilter(member))
    _hold = StartUpHold(handler, hold=level.lower() != "debug")
    handler.addFilter(_hold)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    return _hold


def started() -> None:
    """The start-up is over: write what it logged (see :class:`StartUpHold`)."""
    if _hold is not None:
        _hold.release()


def scrubbed(text: str) -> str:
    """``text`` without the secrets :func:`configure` was given (for lines not logged)."""
    return _secrets.scrub(text)


def start_failed() -> None:
    """The start-up failed with an error that its one line explains: drop what it logged."""
    if _hold is not None:
        _hold.discard()
