"""Session-wide pytest fixtures shared by laneway's tests."""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# The shared contract suites live in tests/support: rewrite their asserts too, so that a
# failure shows the values compared (the order problems found, the keys held up).
pytest.register_assert_rewrite(
    "adversarial", "engine_contract", "misbehaving_contract", "source_contract"
)

from cluster import KafkaCluster  # noqa: E402
from kafka_helpers import run_kafka_script  # noqa: E402
from secured_kafka import SecuredBroker, secured_document  # noqa: E402
from topics import EmbeddedTopic, KafkaTopic, LogTopic  # noqa: E402

from laneway.logs import forget_repeats, show_keys  # noqa: E402

# pytester runs user-like test modules for tests/integration/test_testing_plugin.py.
pytest_plugins = ["pytester"]

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
# The first start in a fresh clone downloads the broker jars with Maven.
START_TIMEOUT_S = 900.0


def real_service(variable: str, script: Path, arguments: tuple[str, ...] = ()) -> Iterator[str]:
    """The address of a real server: ``variable`` when it is set (the server belongs to
    whoever set it), else the one ``script`` (with ``arguments`` after each command)
    already runs for this checkout, else one it starts now and stops when the test session
    ends."""
    preset = os.environ.get(variable, "").strip()
    if preset:
        yield preset
        return
    status = run_kafka_script("status", timeout_s=30.0, script=script, arguments=arguments)
    if status.returncode == 0:
        yield status.stdout.strip()
        return
    started = run_kafka_script(
        "start", timeout_s=START_TIMEOUT_S, script=script, arguments=arguments
    )
    if started.returncode != 0:
        pytest.fail(f"{script} start failed:\n{started.stderr}", pytrace=False)
    try:
        yield started.stdout.strip()
    finally:
        stopped = run_kafka_script("stop", timeout_s=90.0, script=script, arguments=arguments)
        if stopped.returncode != 0:
            sys.stderr.write(f"{script} stop failed:\n{stopped.stderr}")


SERVER_MARKERS = {
    "kafka_bootstrap": "kafka",
    "kafka_cluster": "cluster",
    "postgres_dsn": "postgres",
    "jaeger_endpoints": "jaeger",
    "chromium_path": "browser",
    "compat_broker": "compat",
}
"""The fixture of each real server and the marker a test using it must carry, so that
``-m "not kafka and not postgres"`` (the nox sessions) selects exactly the tests that need
no server."""


SHUFFLE = "LANEWAY_TEST_SHUFFLE"
"""A seed: the tests run in an order shuffled by it (``make flakes`` sets it; every xdist
worker shuffles alike, so they still collect the same list)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    seed = os.environ.get(SHUFFLE, "").strip()
    if seed:
        random.Random(int(seed)).shuffle(items)
    unmarked = [
        f"{item.nodeid} uses {fixture} without @pytest.mark.{marker}"
        for item in items
        for fixture, marker in SERVER_MARKERS.items()
        if fixture in getattr(item, "fixturenames", ()) and not item.get_closest_marker(marker)
    ]
    if unmarked:
        raise pytest.UsageError("tests need their server's marker:\n" + "\n".join(unmarked))


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap address of a real single-node Kafka broker on 127.0.0.1 (scripts/kafka)."""
    yield from real_service("LANEWAY_BROKER", SCRIPTS / "kafka")


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[KafkaCluster]:
    """A real three-broker KRaft cluster on 127.0.0.1 (``scripts/kafka start --brokers 3``),
    with a broker's kill, freeze, thaw and restart by id; ``LANEWAY_CLUSTER`` names its
    bootstrap list when it is someone else's (then killing brokers is left to its owner's
    scripts/kafka, which must be this checkout's)."""
    for bootstrap in real_service("LANEWAY_CLUSTER", SCRIPTS / "kafka", ("--brokers", "3")):
        yield KafkaCluster(bootstrap)


@pytest.fixture(scope="session")
def kafka_secured(kafka_bootstrap: str) -> SecuredBroker:
    """The same broker's SASL_SSL listener (SCRAM-SHA-512, ACLs enforced; see
    tests/support/secured_kafka.py): from ``scripts/kafka status --secured``, or from the
    JSON file ``LANEWAY_SECURED_LISTENER`` names when the broker is someone else's."""
    try:
        broker = SecuredBroker.from_json(secured_document()[0])
    except (OSError, RuntimeError, ValueError, KeyError) as error:
        pytest.fail(f"the broker's secured listener is not known: {error}", pytrace=False)
    if broker.plaintext != kafka_bootstrap:
        pytest.fail(
            f"the secured listener's broker ({broker.plaintext}) is not LANEWAY_BROKER "
            f"({kafka_bootstrap}): set LANEWAY_SECURED_LISTENER to that broker's secured.json",
            pytrace=False,
        )
    return broker


@pytest.fixture(autouse=True)
def _fresh_repeat_memory() -> None:
    """Each test starts with laneway's repeat filter empty (see laneway.logs): a line an
    earlier test logged is not held back from this one."""
    forget_repeats()


@pytest.fixture
def keys_in_logs() -> Iterator[None]:
    """laneway's log lines name message keys during the test, as with ``laneway run
    --health-show-keys`` (see :func:`laneway.logs.show_keys`); hidden again afterwards."""
    show_keys(True)
    yield
    show_keys(False)


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """DSN of a real PostgreSQL server on 127.0.0.1 (scripts/postgres)."""
    yield from real_service("LANEWAY_POSTGRES_DSN", SCRIPTS / "postgres")


@pytest.fixture(scope="session")
def jaeger_endpoints() -> Iterator[dict[str, str]]:
    """A real Jaeger on 127.0.0.1 (scripts/jaeger, in-memory storage): its ``otlp_http``,
    ``otlp_grpc`` and ``query`` URLs (``LANEWAY_JAEGER`` holds them as JSON when set)."""
    for endpoints in real_service("LANEWAY_JAEGER", SCRIPTS / "jaeger"):
        yield json.loads(endpoints)


@pytest.fixture(scope="session")
def chromium_path() -> Iterator[str]:
    """Debian's chromium executable (scripts/chromium: installed with apt-get when missing)."""
    yield from real_service("LANEWAY_CHROMIUM", SCRIPTS / "chromium")


@pytest.fixture
def make_topic(request: pytest.FixtureRequest) -> Callable[[str, int], LogTopic]:
    """Make a fresh topic on the embedded log (``"embedded"``) or the real broker (``"kafka"``)."""

    def make(kind: str, partitions: int) -> LogTopic:
        if kind == "embedded":
            return EmbeddedTopic(partitions)
        if not request.node.get_closest_marker("kafka"):
            pytest.fail(f"{request.node.nodeid} makes a Kafka topic without @pytest.mark.kafka")
        return KafkaTopic(request.getfixturevalue("kafka_bootstrap"), partitions)

    return make
