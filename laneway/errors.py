"""Exceptions laneway raises."""

from __future__ import annotations


class LanewayError(Exception):
    """Base class of every error laneway raises on purpose."""


class ConfigError(LanewayError, ValueError):
    """An invalid option: the message names the option and the allowed values."""


class LogFullError(LanewayError):
    """``EmbeddedLog(when_full="error")``: a partition holds ``capacity`` unconsumed records."""


class UnknownTopicError(LanewayError, KeyError):
    """A topic that does not exist (in the embedded log or the Kafka cluster)."""

    def __str__(self) -> str:
        # KeyError's own str() quotes its argument, which suits a key, not a sentence.
        return str(self.args[0]) if self.args else ""


class HandlerImportError(ConfigError):
    """The process engine's workers cannot import the handler by name (a lambda, a nested
    function, a function of an interactive session), found at construction or start."""


class SourceError(LanewayError):
    """A source failed in a way the consumer cannot recover from (e.g. a fatal Kafka error)."""


class AccessDeniedError(SourceError):
    """The cluster refused this client for good: authentication failed (a wrong username
    or password, an untrusted certificate) or an ACL is missing (group, topic read, a
    dead-letter or results write, the transactional id). The message leads with the cause
    and names the ACL to grant. ``run()`` ends with it (``laneway run`` exits 6); running
    again fails the same way until the credentials or the ACLs change."""


class WriteError(LanewayError):
    """Records a command wrote (``laneway dlq replay``) were refused or not acknowledged
    in time; nothing of that batch was committed, so running the command again writes it
    again (at least once)."""


class TransactionError(LanewayError):
    """``exactly_once=True``: a transaction was aborted or this member was fenced, so what it
    processed since its last commit is not in the log. ``run()`` ends with this error; run
    the consumer again (``laneway run --members`` restarts it) and it resumes from the last
    committed transaction, nothing lost and nothing written twice."""
