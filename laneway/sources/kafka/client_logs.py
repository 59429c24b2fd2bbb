"""librdkafka's own log lines and errors, routed into Python logging without the flood.

Without this, librdkafka writes straight to stderr, about 19 lines a second while a
broker is unreachable. laneway's Kafka clients hand librdkafka the ``laneway.librdkafka``
logger (confluent-kafka's ``logger`` setting; lines arrive while the client is polled)
and an :class:`ErrorReporter` as ``error_cb``. Both loggers hold back repeated lines
(see :mod:`laneway.logs`): each distinct line passes once per ``REPEAT_WINDOW`` seconds
and the next one says how often it was held back. A user's own ``logger`` or
``error_cb`` setting is left as it is.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, KafkaException

from laneway.errors import AccessDeniedError
from laneway.logs import get_logger
from laneway.sources.kafka.denials import Access, Request

LIBRDKAFKA_LOGGER = get_logger("laneway.librdkafka", every_level=True)
"""The logger librdkafka's lines go to (its level tunes them: DEBUG shows everything)."""
ERRORS_LOGGER = get_logger("laneway.kafka")
"""Client errors reported through ``error_cb``."""


class ErrorReporter:
    """An ``error_cb`` that logs client errors as clear warnings (fatal ones as errors)
    and remembers the last for diagnostics (e.g. why a broker could not be reached).

    A permanent refusal (see :mod:`laneway.sources.kafka.denials`) is kept in
    :attr:`denied` too. With a ``request`` (what the client asks the cluster for, to
    name the missing ACL) the client's owner raises it, and whoever ends the run with it
    logs it once as an ERROR: the reporter logs it at DEBUG only.
    """

    def __init__(self, name: str, access: Access, request: Request | None) -> None:
        self._name = name
        self._access = access
        self._request = request
        self.last: str | None = None
        self.denied: AccessDeniedError | None = None

    def __call__(self, error: KafkaError) -> None:
        text = describe_error(error)
        self.last = text
        denial = self._access.refusal(error, self._request or {})
        if denial is not None and self.denied is None:
            self.denied = denial
        if denial is not None and self._request is not None:
            ERRORS_LOGGER.debug("%s: %s", self._name, text)
            return
        level = logging.ERROR if error.fatal() else logging.WARNING
        ERRORS_LOGGER.log(level, "%s: %s", self._name, text)


def client_logging(
    name: str, config: dict[str, object], request: Request | None = None
) -> ErrorReporter:
    """Add the ``logger`` and ``error_cb`` settings to ``config`` unless the user gave
    their own; return the reporter (it also records errors when the user's logger is
    kept). ``request``: what the client asks for, given by an owner that raises the
    refusals the reporter keeps (see :class:`ErrorReporter`)."""
    reporter = ErrorReporter(name, Access(config), request)
    config.setdefault("logger", LIBRDKAFKA_LOGGER)
    config.setdefault("error_cb", reporter)
    return reporter


def describe_error(error: KafkaError) -> str:
    """A librdkafka error as ``NAME (text)``."""
    return f"{error.name()} ({error.str()})"


def describe(exc: Exception) -> str:
    """An exception of a Kafka client call as text (a KafkaError's name and text)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return describe_error(exc.args[0])
    return str(exc)


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The KafkaError a Kafka client call raised with, if any."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None
