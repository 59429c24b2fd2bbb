"""Which Kafka errors are permanent refusals, and how to say what to fix.

The one place laneway decides that a Kafka error is permanent: the cluster refused this
client's identity (SASL authentication failed, the TLS handshake failed) or one of its
requests for lack of an ACL (``TOPIC_``, ``GROUP_``, ``TRANSACTIONAL_ID_`` and
``CLUSTER_AUTHORIZATION_FAILED``). Trying again cannot succeed until someone changes the
credentials or the ACLs, so the consumer stops instead: every place a Kafka client
reports an error (``error_cb``, consumer events, commits, delivery reports, transactional
calls, the start-up checks) asks :meth:`Access.refusal` and raises the
:class:`~laneway.errors.AccessDeniedError` it returns. Other errors keep their callers'
handling (retried, skipped, or logged).

A refusal names the principal when the settings tell it (``User:<sasl.username>`` for
SASL PLAIN and SCRAM logins, ``User:ANONYMOUS`` for PLAINTEXT), the operation, the
resource and its name, and the ``kafka-acls`` command that grants it, e.g. ``the cluster
denied User:alice READ on group 'billing' (GROUP_AUTHORIZATION_FAILED): grant User:alice
READ on the group: kafka-acls --add --allow-principal User:alice --operation Read --group
billing``. Passwords are never part of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Message as KafkaMessage

from laneway.errors import AccessDeniedError

AUTHENTICATION = frozenset(
    {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._SSL}
)
"""Errors of a refused identity: SASL refused (wrong username or password, a mechanism the
broker does not enable), or a TLS handshake that failed because the broker's certificate
is not trusted. (Other ``_SSL`` errors, e.g. a broker that went away mid-handshake while
restarting, are not permanent.)"""

RESOURCES = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "group",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "transactional id",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
}
"""Errors of a missing ACL, with the type of resource the ACL is about."""

_ACL_FLAGS = {
    "topic": "--topic",
    "group": "--group",
    "transactional id": "--transactional-id",
    "cluster": "--cluster",
}
_SASL_LOGINS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})
_UNTRUSTED = (
    "certificate verify failed",
    "unable to get local issuer",
    "self-signed",
    "self signed",
)

Request = Mapping[str, tuple[str, str]]
"""What a client asked for, per resource type: the operation and the resource's name
(e.g. ``{"group": ("READ", "billing")}``), to name the missing ACL."""


def is_permanent(error: KafkaError) -> bool:
    """Whether ``error`` is a refusal that trying again cannot overcome."""
    code = error.code()
    if code == KafkaError._SSL:
        return untrusted(error.str())
    return code in AUTHENTICATION or code in RESOURCES


def untrusted(text: str) -> bool:
    """Whether a TLS error's text says the peer's certificate was not trusted."""
    lowered = text.lower()
    return any(sign in lowered for sign in _UNTRUSTED)


def consuming(group: str, topics: Sequence[str], topic: str | None = None) -> Request:
    """What a consumer of ``group`` asks for: READ on the group and on ``topic`` (when the
    error names one), else on its topics."""
    names = topic if topic else ", ".join(topics)
    return {"group": ("READ", group), "topic": ("READ", names)}


def writing(topic: str | None) -> Request:
    """What a producer writing to ``topic`` asks for (``CREATE`` is asked for by
    :func:`creating`)."""
    return {"topic": ("WRITE", topic or "(the topic written)"), "cluster": ("IDEMPOTENT_WRITE", "")}


def creating(topic: str) -> Request:
    """What creating ``topic`` (a dead-letter topic) asks for."""
    return {"topic": ("CREATE", topic), "cluster": ("CREATE", "")}


class Access:
    """Who a Kafka client is, as far as its settings tell, to name it in refusals.

    Built from a client's librdkafka settings (``security.protocol``, ``sasl.mechanism``,
    ``sasl.username``, ``ssl.ca.location``); keeps no password.
    """

    def __init__(self, config: Mapping[str, object]) -> None:
        protocol = str(config.get("security.protocol", "plaintext")).upper()
        mechanism = config.get("sasl.mechanism", config.get("sasl.mechanisms", "GSSAPI"))
        self.mechanism = str(mechanism).upper()
        username = config.get("sasl.username")
        self.username = None if username is None else str(username)
        self.principal: str | None = None
        if protocol == "PLAINTEXT":
            self.principal = "User:ANONYMOUS"
        elif protocol.startswith("SASL") and self.mechanism in _SASL_LOGINS and self.username:
            self.principal = f"User:{self.username}"
        ca = config.get("ssl.ca.location")
        self.ca_location = None if ca is None else str(ca)

    @classmethod
    def unknown(cls) -> Access:
        """A client whose settings are not at hand (its principal goes unnamed)."""
        access = cls({})
        access.principal = None
        return access

    def refusal(self, error: KafkaError, request: Request) -> AccessDeniedError | None:
        """The :class:`AccessDeniedError` ``error`` means for ``request``, or None when
        the error is not a permanent refusal."""
        code = error.code()
        if code in AUTHENTICATION:
            if not is_permanent(error):
                return None
            return AccessDeniedError(self.authentication_failure(error))
        resource = RESOURCES.get(code)
        if resource is None:
            return None
        return AccessDeniedError(self._missing_acl(error, resource, request.get(resource)))

    def authentication_failure(self, error: KafkaError) -> str:
        """What a refused login or TLS handshake means, the cause first."""
        text = error.str()
        if error.code() == KafkaError._SSL:
            if untrusted(text):
                trusted = (
                    f"ssl.ca.location={self.ca_location}"
                    if self.ca_location
                    else "the system's CA certificates (ssl.ca.location is not set)"
                )
                return f"TLS: the broker's certificate is not trusted by {trusted} ({text})"
            return f"TLS: the handshake with the broker failed ({text})"
        who = f" as {self.username!r}" if self.username else ""
        hint = (
            "is sasl.mechanism one the broker enables?"
            if "mechanism" in text.lower() and "unsupported" in text.lower()
            else "wrong username or password?"
        )
        return f"authentication failed: SASL {self.mechanism}{who} was refused ({hint}): {text}"

    def _missing_acl(self, error: KafkaError, resource: str, wanted: tuple[str, str] | None) -> str:
        who = f"{self.principal} " if self.principal else ""
        grantee = self.principal or "the client's principal"
        code = error.name()
        if wanted is None:
            return (
                f"the cluster denied {who}access to a {resource} ({code}: {error.str()}): "
                f"grant {grantee} the ACL it needs"
            )
        operation, name = wanted
        target = "the cluster" if resource == "cluster" else f"{resource} {name!r}"
        command = (
            f"kafka-acls --add --allow-principal {self.principal} "
            f"--operation {operation.title().replace('_', '')} {_ACL_FLAGS[resource]}"
            + ("" if resource == "cluster" else f" {name}")
        )
        advice = f": {command}" if self.principal and ", " not in name else ""
        return (
            f"the cluster denied {who}{operation} on {target} ({code}): "
            f"grant {grantee} {operation} on the {resource}{advice}"
        )


class Refusals:
    """The refusals of a consumer of ``group`` reading ``topics``: its errors (events,
    exceptions, failed commits) checked in one place, a permanent one raised as
    :class:`AccessDeniedError` naming what the consumer asks for (READ on the group, on
    the topic). ``config``: the consumer's librdkafka settings (who it is)."""

    def __init__(self, config: Mapping[str, object], group: str, topics: Sequence[str]) -> None:
        self.access = Access(config)
        self._group = group
        self._topics = list(topics)
        self.request: Request = consuming(group, self._topics)
        """What the consumer asks for, for its ``error_cb`` reporter."""

    def of(self, error: KafkaError, topic: str | None = None) -> AccessDeniedError:
        """The error to raise for ``error``, a refusal concerning ``topic`` (or the group)."""
        request = consuming(self._group, self._topics, topic)
        return self.access.refusal(error, request) or AccessDeniedError(error.str())

    def check(self, error: KafkaError | BaseException | None, topic: str | None = None) -> None:
        """Raise :meth:`of` the error (a KafkaError, or an exception of a client call) when
        it is a permanent refusal."""
        if isinstance(error, KafkaException) and error.args:
            error = error.args[0]
        if isinstance(error, KafkaError) and is_permanent(error):
            raise self.of(error, topic)

    def check_events(self, events: Iterable[KafkaMessage]) -> None:
        """Raise for the first error event among ``events`` that is a refusal (those
        served before the consumer subscribes, which would be lost otherwise: the
        group's coordinator may already have answered GROUP_AUTHORIZATION_FAILED)."""
        for event in events:
            self.check(event.error(), event.topic())
