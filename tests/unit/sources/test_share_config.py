"""KafkaShareSource arguments, the orderings it allows and ``laneway run --share`` settings:
all checked at construction, so no broker is needed."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

import laneway
from laneway.config import ConsumerConfig
from laneway.errors import ConfigError
from laneway.options import Ordering
from laneway.service.member import consumer_options, open_source
from laneway.service.settings import resolve
from laneway.sources.capabilities import PARTITIONED_LOG, check_source, engine_config
from laneway.sources.embedded.source import EMBEDDED_LOG
from laneway.sources.share.source import SHARE_GROUP
from laneway.types import Message

NOWHERE = "127.0.0.1:1"


def share(**options: object) -> laneway.KafkaShareSource:
    return laneway.KafkaShareSource(NOWHERE, "billing", ["orders"], **options)  # type: ignore[arg-type]


def handle(message: Message) -> None:
    pass


@pytest.mark.parametrize("ordering", ["key", "partition"])
def test_an_ordering_a_share_group_cannot_keep_is_refused_with_the_reason(ordering: str) -> None:
    source = share()
    try:
        with pytest.raises(ConfigError) as error:
            laneway.Consumer(source, handle, ordering=ordering)  # type: ignore[arg-type]
        text = str(error.value)
        assert f"ordering={ordering!r}" in text and "many members at once" in text
        assert "use ordering='unordered'" in text
        laneway.Consumer(source, handle, ordering="unordered")
    finally:
        source.close()


def test_the_default_ordering_is_refused_too() -> None:
    source = share()
    try:
        with pytest.raises(ConfigError, match="ordering='key' is not valid with this source"):
            laneway.Consumer(source, handle)
    finally:
        source.close()


def test_engines_make_one_attempt_per_delivery_with_a_share_group() -> None:
    config = ConsumerConfig.from_options({"ordering": "unordered", "max_retries": 4})
    assert engine_config(config, SHARE_GROUP).max_retries == 0
    assert engine_config(config, SHARE_GROUP).retry.max_retries == 0
    assert engine_config(config, PARTITIONED_LOG) is config
    assert SHARE_GROUP.orderings == {Ordering.UNORDERED} and not SHARE_GROUP.pauses


def test_other_sources_keep_every_ordering(tmp_path: Path) -> None:
    log = laneway.EmbeddedLog()
    log.create_topic("orders", partitions=2)
    source = log.subscribe(["orders"], group="g")
    for ordering in Ordering:
        config = ConsumerConfig.from_options({"ordering": ordering})
        assert check_source(source, config) is EMBEDDED_LOG
    with pytest.raises(ConfigError, match="missing open"):
        check_source(object(), ConsumerConfig())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"start_at": "beginning"}, "start_at='beginning' is not valid; allowed values"),
        (
            {"config": {"share.acknowledgement.mode": "implicit"}},
            "laneway acknowledges each record itself",
        ),
        ({"config": {"group.id": "x"}}, "pass it as KafkaShareSource(group=...)"),
        ({"group_config": {"session.timeout.ms": 1}}, "share group configs start with 'share.'"),
        ({"group_config": {"share.auto.offset.reset": "earliest"}}, "use start_at="),
        ({"group_config": {"share.record.lock.duration.ms": None}}, "expected a value"),
        ({"crash_journal": 3}, "crash_journal=3 is not valid"),
    ],
)
def test_bad_arguments_are_config_errors_naming_them(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as error:
        share(**options)
    assert message in str(error.value)


def test_a_regular_expression_subscription_is_refused() -> None:
    with pytest.raises(ConfigError, match="not regular expressions"):
        laneway.KafkaShareSource(NOWHERE, "g", ["^orders.*"])


def test_the_crash_journal_defaults_to_a_directory_per_cluster_and_group(tmp_path: Path) -> None:
    source = share()
    other = laneway.KafkaShareSource(NOWHERE, "other", ["orders"])
    chosen = share(crash_journal=tmp_path / "journal")
    off = share(crash_journal=False)
    try:
        directory = source._settings.crash_journal
        assert directory is not None and directory.name.startswith("billing-")
        assert directory.is_relative_to(tempfile.gettempdir())
        assert other._settings.crash_journal != directory
        assert chosen._settings.crash_journal == tmp_path / "journal"
        assert off._settings.crash_journal is None
    finally:
        for each in (source, other, chosen, off):
            each.close()


def test_laneway_run_share_makes_a_share_source_and_defaults_to_unordered() -> None:
    flags = {
        "bootstrap_servers": NOWHERE,
        "group": "billing",
        "topics": ("orders",),
        "share": True,
        "start_at": "latest",
    }
    settings = resolve(flags, {}, None)
    with open_source(settings, member=None) as source:
        assert isinstance(source, laneway.KafkaShareSource)
        assert source._settings.start_at.value == "latest"
        assert consumer_options(settings)["ordering"] is Ordering.UNORDERED
        explicit = resolve({**flags, "ordering": "key"}, {}, None)
        assert consumer_options(explicit)["ordering"] is Ordering.KEY
        with pytest.raises(ConfigError, match="ordering='key' is not valid"):
            laneway.Consumer(source, handle, **consumer_options(explicit))
    with pytest.raises(ConfigError, match="share needs Kafka"):
        embedded = resolve({**flags, "bootstrap_servers": None, "log_dir": "x"}, {}, None)
        with open_source(embedded, None):
            pass
    with pytest.raises(ConfigError, match="start_at='soon' is not valid"):
        resolve({**flags, "start_at": "soon"}, {}, None)


def test_laneway_run_sets_the_crash_journal_and_group_configs_from_flag_variable_and_file(
    tmp_path: Path,
) -> None:
    flags = {"bootstrap_servers": NOWHERE, "group": "billing", "topics": ("orders",)}
    shared = {**flags, "share": True}
    environ = {
        "LANEWAY_CRASH_JOURNAL": str(tmp_path / "journal"),
        "LANEWAY_GROUP_CONFIG": "share.record.lock.duration.ms=60000",
    }
    with open_source(resolve(shared, environ, None), None) as source:
        assert isinstance(source, laneway.KafkaShareSource)
        assert source._settings.crash_journal == tmp_path / "journal"
        assert source._settings.group_config == {"share.record.lock.duration.ms": "60000"}
    config = tmp_path / "laneway.toml"
    config.write_text(
        "crash_journal = false\n[group_config]\nshare.record.lock.duration.ms = 45000\n"
        '"share.heartbeat.interval.ms" = 1000\n'
    )
    settings = resolve(shared, {}, config)
    with open_source(settings, None) as source:
        assert isinstance(source, laneway.KafkaShareSource)
        assert source._settings.crash_journal is None
        assert source._settings.group_config == {
            "share.record.lock.duration.ms": "45000",
            "share.heartbeat.interval.ms": "1000",
        }
    off = resolve({**shared, "crash_journal": "off", "group_config": "none"}, {}, None)
    assert (off["crash_journal"], off["group_config"]) == (False, None)
    with pytest.raises(ConfigError, match=r"group_config='share\.x' is not valid; expected KEY="):
        resolve({**shared, "group_config": "share.x"}, {}, None)
    with pytest.raises(ConfigError, match=r"share group configs start with 'share\.'"):
        resolve({**shared, "group_config": "session.timeout.ms=1"}, {}, None)
