"""The test broker's secured listener, and ACLs for it.

`scripts/kafka` runs one broker with two client listeners: PLAINTEXT, where every client is
User:ANONYMOUS, a super user (every other test uses it, untouched by ACLs), and SASL_SSL
with SCRAM-SHA-512 logins, a CA of its own and ACLs enforced: a SCRAM user may do only
what an ACL grants. `scripts/kafka status --secured` describes it (see the script's help);
the `kafka_secured` fixture reads that into a :class:`SecuredBroker`.

ACLs are granted through the PLAINTEXT listener with :func:`grant`, which waits until the
broker's authorizer has them. Tests name their topics and groups with `unique_name`, so
the ACLs of one test never apply to another's resources.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka_helpers import KAFKA_SCRIPT, REQUEST_TIMEOUT_S

ACL_WAIT_S = 10.0


@dataclass(frozen=True)
class SecuredBroker:
    """The SASL_SSL listener of the test broker: its address, how to log in, its users.

    ``bootstrap`` is the SASL_SSL address, ``plaintext`` the same broker's PLAINTEXT one
    (for admin work as a super user); ``users`` maps each SCRAM user to its password
    (``super_user`` is a super user, the others are granted nothing until a test does).
    """

    bootstrap: str
    plaintext: str
    mechanism: str
    ca_location: str
    untrusted_ca: str
    super_user: str
    users: dict[str, str]

    @classmethod
    def from_json(cls, text: str) -> SecuredBroker:
        document = json.loads(text)
        return cls(
            bootstrap=document["bootstrap"],
            plaintext=document["plaintext"],
            mechanism=document["sasl.mechanism"],
            ca_location=document["ssl.ca.location"],
            untrusted_ca=document["untrusted_ca"],
            super_user=document["super_user"],
            users=dict(document["users"]),
        )

    def login(
        self, user: str, password: str | None = None, ca_location: str | None = None
    ) -> dict[str, object]:
        """librdkafka settings of a client that logs in as ``user`` over SASL_SSL (its own
        password and the test CA unless others are given)."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": self.mechanism,
            "sasl.username": user,
            "sasl.password": self.users[user] if password is None else password,
            "ssl.ca.location": ca_location or self.ca_location,
        }

    def client_config(self, user: str) -> dict[str, object]:
        """Settings of a plain confluent-kafka client of ``user`` (bootstrap included)."""
        return {"bootstrap.servers": self.bootstrap, **self.login(user)}


SECURED_VARIABLE = "LANEWAY_SECURED_LISTENER"
"""Names the secured.json of a broker this checkout did not start (beside
LANEWAY_BROKER naming the broker)."""


def secured_document() -> tuple[str, Path]:
    """The secured listener's JSON and the file it is kept in: the one
    ``LANEWAY_SECURED_LISTENER`` names, else this checkout's (`scripts/kafka status
    --secured`). Raises OSError or RuntimeError when there is none."""
    given = os.environ.get(SECURED_VARIABLE, "").strip()
    if given:
        return Path(given).read_text(), Path(given)
    return secured_listener(), KAFKA_SCRIPT.parent.parent / ".kafka" / "secured.json"


def secured_listener(script: Path = KAFKA_SCRIPT) -> str:
    """`scripts/kafka status --secured`: the secured listener's JSON, or RuntimeError."""
    done = subprocess.run(
        [sys.executable, str(script), "status", "--secured"],
        capture_output=True,
        text=True,
        timeout=30.0,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script} status --secured failed: {done.stderr.strip()}")
    return done.stdout


_RESOURCES = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "transactional id": ResourceType.TRANSACTIONAL_ID,
    "cluster": ResourceType.BROKER,
}


def grant(
    broker: SecuredBroker,
    user: str,
    resource: str,
    name: str,
    *operations: str,
    prefixed: bool = False,
) -> None:
    """Allow ``user`` each of ``operations`` (``"READ"``, ``"WRITE"``, ``"DESCRIBE"``,
    ``"CREATE"``, ...) on the ``resource`` (``"topic"``, ``"group"``, ``"transactional
    id"``, ``"cluster"``) called ``name`` (a prefix of names with ``prefixed``), as the
    super user over PLAINTEXT; return once the broker's authorizer has the ACLs."""
    pattern = ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL
    kind = _RESOURCES[resource]
    if kind is ResourceType.BROKER:
        name = "kafka-cluster"
    bindings = [
        AclBinding(
            kind,
            name,
            pattern,
            f"User:{user}",
            "*",
            getattr(AclOperation, operation),
            AclPermissionType.ALLOW,
        )
        for operation in operations
    ]
    admin = AdminClient({"bootstrap.servers": broker.plaintext})
    for future in admin.create_acls(bindings, request_timeout=REQUEST_TIMEOUT_S).values():
        future.result(timeout=REQUEST_TIMEOUT_S)
    # The controller has them; wait until the broker's authorizer serves them too.
    wanted = AclBindingFilter(
        kind, name, pattern, f"User:{user}", "*", AclOperation.ANY, AclPermissionType.ANY
    )
    deadline = time.monotonic() + ACL_WAIT_S
    while True:
        found = admin.describe_acls(wanted, request_timeout=REQUEST_TIMEOUT_S)
        have = {binding.operation for binding in found.result(timeout=REQUEST_TIMEOUT_S)}
        if {binding.operation for binding in bindings} <= have:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"ACLs {operations} on {resource} {name!r} not in effect")
        time.sleep(0.05)
