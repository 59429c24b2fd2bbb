"""laneway.sources.kafka.denials: which Kafka errors are permanent, and what a refusal says."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from laneway.sources.kafka.denials import Access, consuming, creating, is_permanent, writing

SCRAM = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "alice",
    "sasl.password": "s3cret-password",
    "ssl.ca.location": "/etc/kafka/ca.pem",
}


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._AUTHENTICATION,
    ],
)
def test_refusals_are_permanent(code: int) -> None:
    assert is_permanent(KafkaError(code))
    assert Access(SCRAM).refusal(KafkaError(code), {}) is not None


def test_a_tls_error_is_permanent_only_when_the_certificate_is_not_trusted() -> None:
    untrusted = KafkaError(KafkaError._SSL, "SSL handshake failed: certificate verify failed")
    assert is_permanent(untrusted)
    # A broker that went away mid-handshake (restarting): try again.
    gone = KafkaError(KafkaError._SSL, "SSL handshake failed: Disconnected (after 3ms)")
    assert not is_permanent(gone)
    assert Access(SCRAM).refusal(gone, {}) is None


@pytest.mark.parametrize(
    "code",
    [
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.NOT_COORDINATOR,
        KafkaError._MSG_TIMED_OUT,
    ],
)
def test_other_errors_are_not(code: int) -> None:
    assert not is_permanent(KafkaError(code))
    assert Access(SCRAM).refusal(KafkaError(code), {"topic": ("READ", "t")}) is None


@pytest.mark.parametrize(
    ("config", "principal"),
    [
        (SCRAM, "User:alice"),
        ({**SCRAM, "sasl.mechanism": "PLAIN", "security.protocol": "sasl_plaintext"}, "User:alice"),
        ({}, "User:ANONYMOUS"),
        ({"security.protocol": "SSL"}, None),  # the certificate's name: not known here
        ({**SCRAM, "sasl.mechanism": "OAUTHBEARER"}, None),
    ],
)
def test_the_principal_is_named_when_the_settings_tell_it(
    config: dict[str, object], principal: str | None
) -> None:
    assert Access(config).principal == principal


def test_a_missing_group_acl_names_the_acl_and_the_command_that_grants_it() -> None:
    error = KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)
    denial = Access(SCRAM).refusal(error, consuming("billing", ["orders"]))
    assert str(denial) == (
        "the cluster denied User:alice READ on group 'billing' (GROUP_AUTHORIZATION_FAILED): "
        "grant User:alice READ on the group: kafka-acls --add --allow-principal User:alice "
        "--operation Read --group billing"
    )


@pytest.mark.parametrize(
    ("code", "request_", "expected"),
    [
        (
            KafkaError.TOPIC_AUTHORIZATION_FAILED,
            consuming("billing", ["orders"], "orders"),
            "READ on topic 'orders' (TOPIC_AUTHORIZATION_FAILED): grant User:alice READ on "
            "the topic: kafka-acls --add --allow-principal User:alice --operation Read "
            "--topic orders",
        ),
        (
            KafkaError.TOPIC_AUTHORIZATION_FAILED,
            writing("results"),
            "WRITE on topic 'results' (TOPIC_AUTHORIZATION_FAILED)",
        ),
        (
            KafkaError.TOPIC_AUTHORIZATION_FAILED,
            creating("orders.dlq"),
            "CREATE on topic 'orders.dlq' (TOPIC_AUTHORIZATION_FAILED)",
        ),
        (
            KafkaError.CLUSTER_AUTHORIZATION_FAILED,
            writing("results"),
            "IDEMPOTENT_WRITE on the cluster (CLUSTER_AUTHORIZATION_FAILED): grant User:alice "
            "IDEMPOTENT_WRITE on the cluster: kafka-acls --add --allow-principal User:alice "
            "--operation IdempotentWrite --cluster",
        ),
        (
            KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            {"transactional id": ("WRITE", "laneway-billing-0")},
            "WRITE on transactional id 'laneway-billing-0' "
            "(TRANSACTIONAL_ID_AUTHORIZATION_FAILED): grant User:alice WRITE on the "
            "transactional id: kafka-acls --add --allow-principal User:alice --operation "
            "Write --transactional-id laneway-billing-0",
        ),
    ],
)
def test_each_missing_acl_is_named(code: int, request_: dict[str, object], expected: str) -> None:
    denial = Access(SCRAM).refusal(KafkaError(code), request_)  # type: ignore[arg-type]
    assert str(denial).startswith("the cluster denied User:alice ")
    assert expected in str(denial)


def test_a_principal_that_is_not_known_is_not_guessed() -> None:
    error = KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)
    denial = Access({"security.protocol": "SSL"}).refusal(error, consuming("billing", ["t"]))
    assert str(denial) == (
        "the cluster denied READ on group 'billing' (GROUP_AUTHORIZATION_FAILED): "
        "grant the client's principal READ on the group"
    )


def test_a_refused_login_leads_with_the_cause_and_never_shows_the_password() -> None:
    text = (
        "sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: Authentication "
        "failed during authentication due to invalid credentials with SASL mechanism "
        "SCRAM-SHA-512"
    )
    denial = Access(SCRAM).refusal(KafkaError(KafkaError._AUTHENTICATION, text), {})
    assert str(denial) == (
        "authentication failed: SASL SCRAM-SHA-512 as 'alice' was refused (wrong username "
        f"or password?): {text}"
    )
    assert "s3cret" not in str(denial)


def test_an_untrusted_certificate_names_the_ca_file_or_its_absence() -> None:
    text = (
        "ssl://127.0.0.1:9093/bootstrap: SSL handshake failed: error:0A000086:SSL "
        "routines::certificate verify failed: broker certificate could not be verified"
    )
    error = KafkaError(KafkaError._SSL, text)
    assert str(Access(SCRAM).refusal(error, {})) == (
        f"TLS: the broker's certificate is not trusted by ssl.ca.location=/etc/kafka/ca.pem "
        f"({text})"
    )
    without = {key: value for key, value in SCRAM.items() if key != "ssl.ca.location"}
    assert str(Access(without).refusal(error, {})).startswith(
        "TLS: the broker's certificate is not trusted by the system's CA certificates "
        "(ssl.ca.location is not set)"
    )
