"""Topic names: one check (Kafka's rule) for every source and ``laneway run``, at
construction, so a typo is a ConfigError naming the topic instead of a consumer that waits
for a topic that cannot exist. No broker needed."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

import laneway
from laneway.errors import ConfigError
from laneway.service.member import open_source
from laneway.service.settings import resolve
from laneway.sources.kafka.client_config import METADATA_REFRESH_MS, build_settings
from laneway.sources.topic_names import MAX_LENGTH, check_topic_name, check_topic_names

NOWHERE = "127.0.0.1:1"
RULE = r"Kafka allows 1-249 characters of ASCII letters, digits, '\.', '_' and '-'"

BAD = [
    ("bad topic!", r"it contains ' ', '!'"),
    ("a b", r"it contains ' '.*several topics are several names"),
    ("a,b", r"it contains ','.*repeat --topic or separate them with commas"),
    ("", r"it is empty"),
    (".", r"'\.' is reserved"),
    ("..", r"'\.\.' is reserved"),
    ("x" * (MAX_LENGTH + 1), r"it is 250 characters long"),
    ("commandes-été", r"it contains 'é'"),
    ("orders/eu", r"it contains '/'"),
]


@pytest.mark.parametrize(("name", "problem"), BAD)
def test_an_illegal_name_is_refused_naming_it_the_problem_and_the_rule(
    name: str, problem: str
) -> None:
    with pytest.raises(ConfigError, match=f"topic name {name!r} is not valid".replace(".", r"\.")):
        check_topic_name(name)
    with pytest.raises(ConfigError, match=problem):
        check_topic_name(name)
    with pytest.raises(ConfigError, match=RULE):
        check_topic_name(name)


@pytest.mark.parametrize("name", ["orders", "a", "x" * MAX_LENGTH, "a.b_c-D9", "..."])
def test_legal_names_pass(name: str) -> None:
    assert check_topic_name(name) == name


def test_patterns_pass_only_where_a_source_takes_them() -> None:
    assert check_topic_names(["^orders-.*", "orders"], patterns=True) == ("^orders-.*", "orders")
    with pytest.raises(ConfigError, match=r"topic name '\^orders-\.\*'"):
        check_topic_names(["^orders-.*"])


SOURCES: dict[str, Callable[[list[str]], object]] = {
    "KafkaSource": lambda topics: laneway.KafkaSource(NOWHERE, "billing", topics),
    "KafkaShareSource": lambda topics: laneway.KafkaShareSource(NOWHERE, "billing", topics),
    "EmbeddedLog.subscribe": lambda topics: laneway.EmbeddedLog().subscribe(topics, "billing"),
    "EmbeddedLog.create_topic": lambda topics: laneway.EmbeddedLog().create_topic(topics[-1]),
}


@pytest.mark.parametrize("make", SOURCES.values(), ids=SOURCES.keys())
@pytest.mark.parametrize("name", ["bad topic!", "a b"])
def test_every_source_refuses_an_illegal_topic_when_it_is_made(
    make: Callable[[list[str]], object], name: str
) -> None:
    with pytest.raises(ConfigError, match=f"topic name {name!r} is not valid.*{RULE}"):
        make(["orders", name])


@pytest.mark.parametrize(
    ("flags", "variable", "named"),
    [
        ({"log_dir": "{tmp}"}, "a b", "topic name 'a b' is not valid (topics): it contains ' '"),
        ({"bootstrap_servers": NOWHERE}, "orders,bad topic!", "topic name 'bad topic!'"),
        ({"bootstrap_servers": NOWHERE, "share": True}, "a b", "topic name 'a b'"),
    ],
    ids=["embedded", "kafka", "share"],
)
def test_laneway_run_refuses_an_illegal_topic_from_the_environment(
    flags: dict[str, object], variable: str, named: str, tmp_path: Path
) -> None:
    given = {k: v.format(tmp=tmp_path) if isinstance(v, str) else v for k, v in flags.items()}
    settings = resolve({**given, "group": "billing"}, {"LANEWAY_TOPICS": variable}, None)
    # `laneway run` exits 2 (usage) with it
    with pytest.raises(ConfigError, match=re.escape(named)), open_source(settings, member=None):
        pass


def test_waiting_for_topics_refreshes_metadata_within_seconds() -> None:
    waiting = build_settings(NOWHERE, "g", ["orders"], {}, wait_for_topics=True)
    assert waiting.consumer_config["topic.metadata.refresh.interval.ms"] == 5_000
    plain = build_settings(NOWHERE, "g", ["orders"], {})
    assert "topic.metadata.refresh.interval.ms" not in plain.consumer_config  # 300 s
    assert METADATA_REFRESH_MS == 300_000
    mine = {"topic.metadata.refresh.interval.ms": 60_000}
    chosen = build_settings(NOWHERE, "g", ["orders"], mine, wait_for_topics=True)
    assert chosen.consumer_config["topic.metadata.refresh.interval.ms"] == 60_000
