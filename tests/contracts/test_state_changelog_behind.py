"""State is never reset without a word: a changelog that ends before what a valid state file
holds is refused, unless ``when_changelog_behind`` says what to do.

After a first run fills the state files, the changelog is deleted (on Kafka with Kafka's
own kafka-topics; on a durable embedded log by removing the topic from its directory) and
the next consumer creates it again, empty, the input topic and the group's offsets as they
were. Then by default the run ends with a ConfigError naming the
topic, the partition, the file's checkpoint and the changelog's end, the file untouched;
``rebuild`` writes the file's state back into the changelog and counts on exactly;
``start_empty`` sets the file aside and counts from what the changelog holds.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import kafka_helpers
import pytest
import state_handlers
from changelogs import changelog_state
from chaos_harness import run_bounded
from topics import SOURCES, EmbeddedTopic, KafkaTopic, LogTopic

import laneway

PARTITIONS = 3
KEYS = 20


def inputs(count: int, start: int = 0) -> list[tuple[bytes, bytes]]:
    return [(f"k{i % KEYS}".encode(), b"1") for i in range(start, start + count)]


def consume(topic: LogTopic, store: laneway.StateStore, count: int) -> laneway.ConsumerStats:
    consumer = laneway.Consumer(
        topic.source("counters"),
        state_handlers.count,
        state=store,
        engine="thread",
        concurrency=8,
        handle_signals=False,
        commit_interval=0.2,
    )
    return run_bounded(consumer, count, limit=90.0)


class DurableTopic(EmbeddedTopic):
    """A topic of an embedded log in a directory (whose changelog can be deleted)."""

    def __init__(self, path: Path, partitions: int) -> None:
        self.path = path
        self.log = laneway.EmbeddedLog(path)
        self.name = "orders"
        self.log.create_topic(self.name, partitions=partitions)


def lose_the_changelog(topic: LogTopic, changelog: str) -> None:
    """Delete the changelog topic (the next consumer creates it again, empty)."""
    if isinstance(topic, KafkaTopic):
        kafka_helpers.delete_topic(topic.bootstrap, changelog)
        return
    assert isinstance(topic, DurableTopic)
    topic.log.close()
    listed = topic.path / "@meta" / "topics.json"
    topics = json.loads(listed.read_text())
    del topics["topics"][changelog]
    listed.write_text(json.dumps(topics))
    shutil.rmtree(topic.path / changelog)
    topic.log = laneway.EmbeddedLog(topic.path)


def first_run(make_topic: Any, kind: str, tmp_path: Path) -> tuple[LogTopic, str, list[Any]]:
    topic = (
        make_topic(kind, PARTITIONS)
        if kind == "kafka"
        else DurableTopic(tmp_path / "log", PARTITIONS)
    )
    first = inputs(300)
    topic.produce(first)
    changelog = f"{topic.name}.counts"
    consume(topic, laneway.StateStore(tmp_path / "state", changelog=changelog), len(first))
    lose_the_changelog(topic, changelog)
    return topic, changelog, first


def checkpoints(folder: Path) -> dict[str, int]:
    from laneway.state.files.base import StateBackend, open_file

    found = {}
    for path in sorted(folder.glob("*.sqlite")):
        file = open_file(StateBackend.SQLITE, path)
        found[path.name] = int(file.meta()["checkpoint"])
        file.close()
    return found


@pytest.mark.parametrize("kind", SOURCES)
def test_by_default_the_run_is_refused_naming_the_partition(
    make_topic: Any, kind: str, tmp_path: Path
) -> None:
    topic, changelog, _ = first_run(make_topic, kind, tmp_path)
    folder = tmp_path / "state" / "counters" / changelog
    before = checkpoints(folder)
    assert all(checkpoint > 0 for checkpoint in before.values()), before
    topic.produce(inputs(60, start=300))
    with pytest.raises(laneway.ConfigError) as refused:
        consume(topic, laneway.StateStore(tmp_path / "state", changelog=changelog), 60)
    text = str(refused.value)
    found = re.search(
        rf"state of {re.escape(topic.name)}\[(\d)\]: the changelog {re.escape(changelog)}\[\1\]"
        rf" .* ends at 0, before the checkpoint (\d+) of its state file (\S+):",
        text,
    )
    assert found, text
    assert before[Path(found[3]).name] == int(found[2])
    assert "state_changelog_behind=rebuild" in text and "start_empty" in text
    assert checkpoints(folder) == before  # the files are left as they were
    assert not list(folder.glob("*.set-aside-*"))


@pytest.mark.parametrize("kind", SOURCES)
def test_rebuild_writes_the_files_state_back_and_counts_on_exactly(
    make_topic: Any, kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topic, changelog, first = first_run(make_topic, kind, tmp_path)
    second = inputs(90, start=300)
    topic.produce(second)
    store = laneway.StateStore(
        tmp_path / "state", changelog=changelog, when_changelog_behind="rebuild"
    )
    with caplog.at_level("WARNING", logger="laneway.state"):
        consume(topic, store, len(second))
    assert changelog_state(topic, changelog) == Counter(k for k, _ in first + second)
    assert caplog.text.count("rebuilt the changelog") == PARTITIONS
    third = inputs(30, start=390)
    topic.produce(third)
    caplog.clear()
    with caplog.at_level("INFO", logger="laneway.state"):  # a plain restart: from checkpoints
        consume(topic, laneway.StateStore(tmp_path / "state", changelog=changelog), len(third))
    assert "full restore" not in caplog.text and "rebuil" not in caplog.text
    assert changelog_state(topic, changelog) == Counter(k for k, _ in first + second + third)


@pytest.mark.parametrize("kind", SOURCES)
def test_start_empty_sets_the_files_aside_and_counts_from_the_changelog(
    make_topic: Any, kind: str, tmp_path: Path
) -> None:
    topic, changelog, _ = first_run(make_topic, kind, tmp_path)
    second = inputs(90, start=300)
    topic.produce(second)
    store = laneway.StateStore(
        tmp_path / "state", changelog=changelog, when_changelog_behind="start_empty"
    )
    consume(topic, store, len(second))
    assert changelog_state(topic, changelog) == Counter(k for k, _ in second)
    folder = tmp_path / "state" / "counters" / changelog
    assert len([p for p in folder.glob("*.set-aside-*") if p.name.endswith("Z")]) == PARTITIONS


def test_the_choice_is_checked() -> None:
    with pytest.raises(laneway.ConfigError, match=r"when_changelog_behind='maybe'.*rebuild"):
        laneway.StateStore(None, changelog="t.state", when_changelog_behind="maybe")
