"""The payments-ledger example (examples/ledger) through every engine on both sources.

A seeded workload of 100,000 transactions for 1,000 clients runs once in a plain sequential
loop (the reference), then through laneway with ``ordering="key"`` on each engine, from the
EmbeddedLog and from a real Kafka broker (8 partitions each). Every run must end with the
reference's balances (available, held, total, locked) and per-client rejected-transaction
counts, exactly, and with every partition committed to its end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from checkout import ROOT
from kafka_helpers import committed_offsets, create_topic, end_offsets, produce, unique_name

import laneway

EXAMPLE = ROOT / "examples" / "ledger"
# The example's modules are top-level (`ledger`, `handlers`, ...). The process engine's spawned
# workers import the handler by name; multiprocessing hands them this process's sys.path, so
# they find it too (no PYTHONPATH needed).
sys.path.insert(0, str(EXAMPLE))

from generator import generate, reference  # noqa: E402
from handlers import LedgerHandler, transaction_of  # noqa: E402
from ledger import APPLIED, REDELIVERED, Balance, Ledger  # noqa: E402
from service import ENGINES, TOPIC, consume, differences, records  # noqa: E402
from transactions import Kind, Transaction, decode, encode, format_amount, parse_amount  # noqa: E402

COUNT = 100_000
CLIENTS = 1_000
PARTITIONS = 8
SEED = 20_240_611
REASONS = (
    "InsufficientFunds",
    "UnknownTransaction",
    "InvalidDispute",
    "AccountLocked",
    "DuplicateTransaction",
)


@dataclass(frozen=True)
class Workload:
    transactions: list[Transaction]
    records: list[tuple[bytes, bytes]]
    expected: dict[int, Balance]
    outcomes: dict[str, int]


@pytest.fixture(scope="module")
def workload() -> Workload:
    transactions = generate(COUNT, CLIENTS, SEED)
    ledger, outcomes = reference(transactions)
    return Workload(transactions, records(transactions), ledger.balances(), outcomes)


@pytest.fixture(scope="module")
def kafka_topic(kafka_bootstrap: str, workload: Workload) -> str:
    """One topic per module, produced once (idempotent producer); each engine uses its own group."""
    topic = unique_name("ledger")
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    produce(kafka_bootstrap, topic, workload.records, timeout_s=120.0)
    return topic


# -- the domain, on its own -------------------------------------------------------------


def test_amounts_are_exact_integers_of_a_ten_thousandth() -> None:
    assert parse_amount("1.5") == 15_000
    assert parse_amount("0.0001") == 1
    assert parse_amount("12") == 120_000
    assert format_amount(-123_456) == "-12.3456"
    for bad in ("1.23456", "-1", "1e3", "", ".5", "1.", "nan", "\uff11"):
        with pytest.raises(ValueError):
            parse_amount(bad)


def test_wire_format_round_trips_and_rejects_malformed_lines() -> None:
    tx = Transaction(Kind.WITHDRAWAL, 65_535, 4_294_967_295, 1)
    assert encode(tx) == b"withdrawal,65535,4294967295,0.0001"
    assert decode(encode(tx)) == tx
    assert decode(b"dispute,7,3,") == Transaction(Kind.DISPUTE, 7, 3)
    for bad in (
        b"deposit,1,2",
        b"refund,1,2,3",
        b"deposit,65536,2,1",
        b"deposit,1,2,0",
        b"dispute,1,2,5",
        b"deposit,1,4294967296,1",
    ):
        with pytest.raises(ValueError):
            decode(bad)


def test_ledger_rules_and_rejections() -> None:
    ledger = Ledger()
    steps = [
        (Transaction(Kind.DEPOSIT, 1, 1, 100), APPLIED),
        (Transaction(Kind.DEPOSIT, 2, 2, 50), APPLIED),
        (Transaction(Kind.WITHDRAWAL, 1, 3, 101), "InsufficientFunds"),
        (Transaction(Kind.WITHDRAWAL, 1, 4, 30), APPLIED),
        (Transaction(Kind.DEPOSIT, 1, 4, 5), "DuplicateTransaction"),
        (Transaction(Kind.DISPUTE, 1, 2), "UnknownTransaction"),  # client 2's deposit
        (Transaction(Kind.DISPUTE, 1, 4), "UnknownTransaction"),  # a withdrawal
        (Transaction(Kind.RESOLVE, 1, 1), "InvalidDispute"),
        (Transaction(Kind.DISPUTE, 1, 1), APPLIED),  # available 70 - 100 = -30, held 100
        (Transaction(Kind.DISPUTE, 1, 1), "InvalidDispute"),
        (Transaction(Kind.RESOLVE, 1, 1), APPLIED),
        (Transaction(Kind.DISPUTE, 1, 1), APPLIED),
        (Transaction(Kind.CHARGEBACK, 1, 1), APPLIED),
        (Transaction(Kind.DEPOSIT, 1, 9, 1), "AccountLocked"),
    ]
    assert [ledger.record(tx) for tx, _ in steps] == [outcome for _, outcome in steps]
    assert ledger.balances() == {
        1: Balance(available=-30, held=0, total=-30, locked=True, rejected=7),
        2: Balance(available=50, held=0, total=50, locked=False, rejected=0),
    }


def test_redelivered_offsets_are_applied_once() -> None:
    ledger = Ledger()
    handler = LedgerHandler(ledger)
    deposit = laneway.Message(TOPIC, 0, 5, b"7", b"deposit,7,1,1.0000")
    handler(deposit)
    handler(deposit)
    assert ledger.record(Transaction(Kind.DEPOSIT, 7, 2, 1), offset=5) == REDELIVERED
    assert ledger.balances()[7] == Balance(10_000, 0, 10_000, False, 0)


def test_a_record_not_keyed_by_its_client_is_malformed() -> None:
    with pytest.raises(ValueError, match="keyed by client"):
        transaction_of(laneway.Message(TOPIC, 0, 0, b"8", b"deposit,7,1,1.0000"))


# -- the workload -------------------------------------------------------------------------


def test_workload_is_deterministic_and_exercises_every_rule(workload: Workload) -> None:
    assert generate(5_000, 100, SEED) == generate(5_000, 100, SEED)
    assert len(workload.transactions) == COUNT
    assert len(workload.expected) == CLIENTS
    assert {tx.kind for tx in workload.transactions} == set(Kind)
    for reason in REASONS:
        assert workload.outcomes.get(reason, 0) >= COUNT // 500, (reason, workload.outcomes)
    assert workload.outcomes[APPLIED] > COUNT // 2
    locked = sum(balance.locked for balance in workload.expected.values())
    assert CLIENTS // 20 <= locked <= CLIENTS // 2
    assert any(balance.held > 0 for balance in workload.expected.values())


def test_workload_detects_a_changed_order_within_a_client(workload: Workload) -> None:
    """The check below is meaningful: running a client's transactions out of order changes
    balances, so an engine breaking per-key order would fail it."""
    swapped = list(workload.transactions)
    by_client: dict[int, list[int]] = {}
    for index, tx in enumerate(swapped):
        by_client.setdefault(tx.client, []).append(index)
    for positions in list(by_client.values())[:50]:
        for first, second in zip(positions[::2], positions[1::2], strict=False):
            swapped[first], swapped[second] = swapped[second], swapped[first]
    ledger, _ = reference(swapped)
    assert len(differences(workload.expected, ledger.balances())) >= 25


# -- every engine on both sources -------------------------------------------------------

SOURCES = [
    pytest.param("embedded", id="embedded"),
    pytest.param("kafka", id="kafka", marks=pytest.mark.kafka),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("source_kind", SOURCES)
def test_engine_matches_the_sequential_run(
    source_kind: str,
    engine: str,
    workload: Workload,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    group = unique_name(f"ledger-{engine}")
    if source_kind == "kafka":
        bootstrap: str = request.getfixturevalue("kafka_bootstrap")
        topic: str = request.getfixturevalue("kafka_topic")
        kafka = laneway.KafkaSource(bootstrap_servers=bootstrap, group=group, topics=[topic])
        run = consume(kafka, engine, COUNT, changelog_dir=tmp_path, idle_timeout=60.0)
        ends = end_offsets(bootstrap, topic)
        committed = {p: at for p, (at, _) in committed_offsets(bootstrap, group, topic).items()}
    else:
        with laneway.EmbeddedLog() as log:
            log.create_topic(TOPIC, partitions=PARTITIONS)
            assert log.produce_many(TOPIC, workload.records) == COUNT
            embedded = log.subscribe([TOPIC], group=group)
            run = consume(embedded, engine, COUNT, changelog_dir=tmp_path, idle_timeout=60.0)
            ends = log.end_offsets(TOPIC)
            committed = {p: at.offset for p, at in log.committed(group, TOPIC).items()}

    print(f"{source_kind}/{engine}: {COUNT:,} transactions in {run.seconds:.2f} s")
    assert (run.stats.processed, run.stats.failed) == (COUNT, 0)
    assert differences(workload.expected, run.balances) == []
    if engine == "process":
        assert run.changelog is not None
        assert (run.changelog.records, run.changelog.positions) == (COUNT, COUNT)
        assert 1 <= run.changelog.files <= (os.cpu_count() or 1)
    assert sum(ends.values()) == COUNT
    assert committed == ends


@pytest.mark.parametrize("source_kind", SOURCES)
def test_run_script_verifies_and_times_an_engine(
    source_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The script runs from anywhere: its directory is on sys.path, which spawned workers get."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    kafka = []
    if source_kind == "kafka":
        kafka = ["--bootstrap-servers", request.getfixturevalue("kafka_bootstrap")]
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE / "run.py"),
            "--engine",
            "process",
            "--transactions",
            "5000",
            "--clients",
            "100",
            *kafka,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "process:" in done.stdout and "PASS" in done.stdout
