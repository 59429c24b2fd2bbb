"""The fairness options: defaults derived from max_buffered, and clear errors naming them."""

from __future__ import annotations

import pytest

import laneway
from laneway.config import ConsumerConfig
from laneway.errors import ConfigError
from laneway.options import NullKeys


def tenant(message: laneway.Message) -> bytes:
    return message.key or b""


def first(message: laneway.Message) -> int:
    return 0


def test_the_per_key_cap_is_a_sixteenth_of_the_buffer_unless_given() -> None:
    assert ConsumerConfig.from_options({"max_buffered": 4_000}).max_buffered_per_key == 250
    assert ConsumerConfig.from_options({"max_buffered": 8}).max_buffered_per_key == 1
    given = ConsumerConfig.from_options({"max_buffered_per_key": 7})
    assert given.max_buffered_per_key == 7
    assert ConsumerConfig.from_options({}).null_keys is NullKeys.PARTITION


def test_a_per_key_cap_above_the_buffer_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"max_buffered_per_key=500 .* max_buffered=400"):
        ConsumerConfig.from_options({"max_buffered": 400, "max_buffered_per_key": 500})
    with pytest.raises(ConfigError, match="max_buffered_per_key"):
        ConsumerConfig.from_options({"max_buffered_per_key": 0})


@pytest.mark.parametrize("name", ["fairness", "priority"])
def test_fairness_and_priority_are_refused_on_the_sync_engine(name: str) -> None:
    value = laneway.Fairness(tenant) if name == "fairness" else first
    with pytest.raises(ConfigError, match=f"{name} is not valid with engine='sync'"):
        ConsumerConfig.from_options({"engine": "sync", name: value})


def test_fairness_and_priority_take_module_attr_text_as_laneway_run_passes_it() -> None:
    config = ConsumerConfig.from_options(
        {
            "engine": "thread",
            "fairness": "tests_fairness_values:FAIRNESS",
            "priority": "tests_fairness_values:urgency",
        }
    )
    assert isinstance(config.fairness, laneway.Fairness)
    assert callable(config.priority)


def test_a_fairness_that_is_not_one_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"fairness=.* expected a laneway.Fairness"):
        ConsumerConfig.from_options({"engine": "thread", "fairness": tenant})
    with pytest.raises(ConfigError, match=r"priority=3 .* expected a callable"):
        ConsumerConfig.from_options({"engine": "thread", "priority": 3})
    with pytest.raises(ConfigError, match="null_keys"):
        ConsumerConfig.from_options({"null_keys": "random"})
