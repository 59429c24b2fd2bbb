"""The one option list: ConsumerConfig's fields are the source of every derived surface."""

from __future__ import annotations

import dataclasses
from typing import get_args, get_type_hints

import pytest

import laneway
from laneway.config import (
    ConsumerConfig,
    ConsumerOptions,
    env_variable,
    option_defaults,
    option_specs,
    options_table,
)
from laneway.options import (
    ConcurrencyLimit,
    ConcurrencyLimitName,
    EngineKind,
    EngineName,
    EventLoop,
    EventLoopName,
    NullKeys,
    NullKeysName,
    Ordering,
    OrderingName,
    StallAction,
    StallActionName,
    TracingMode,
    TracingModeName,
    names,
)


def test_the_typed_keywords_are_exactly_the_options() -> None:
    assert list(get_type_hints(ConsumerOptions)) == list(option_specs())


@pytest.mark.parametrize(
    ("literal", "enum_type"),
    [
        (EngineName, EngineKind),
        (OrderingName, Ordering),
        (EventLoopName, EventLoop),
        (StallActionName, StallAction),
        (TracingModeName, TracingMode),
        (ConcurrencyLimitName, ConcurrencyLimit),
        (NullKeysName, NullKeys),
    ],
)
def test_literal_names_equal_their_enum(literal: object, enum_type: type) -> None:
    assert get_args(literal) == names(enum_type)


def test_every_option_has_help_a_default_and_a_place_in_the_docstring() -> None:
    docstring = ConsumerConfig.__doc__ or ""
    defaults = option_defaults()
    for name, spec in option_specs().items():
        assert spec.help, name
        assert name in defaults
        assert f"``{name}`` (default" in docstring, name
    assert options_table() in docstring.replace("\n    ", "\n")


def test_choices_of_enum_options_come_from_the_enum() -> None:
    specs = option_specs()
    assert specs["engine"].choices == ("sync", "thread", "async", "process")
    assert specs["ordering"].choices == ("key", "partition", "unordered")
    assert specs["event_loop"].choices == ("auto", "asyncio", "uvloop")


def test_environment_variables_are_derived_from_the_names() -> None:
    assert env_variable("concurrency") == "LANEWAY_CONCURRENCY"
    assert env_variable("max_buffered") == "LANEWAY_MAX_BUFFERED"


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("concurrency", "64", 64),
        ("concurrency", "none", None),
        ("max_buffered", "10_000", 10_000),
        ("commit_interval", "0.5", 0.5),
        ("handle_signals", "false", False),
        ("handle_signals", "Yes", True),
        ("engine", "async", "async"),
        ("dead_letter_topic", "none", None),
        ("dead_letter_topic", "{topic}.failed", "{topic}.failed"),
        ("handler_timeout", "2", 2.0),
    ],
)
def test_text_values_parse_to_what_the_option_checks(name: str, text: str, value: object) -> None:
    spec = option_specs()[name]
    assert spec.parse(text, name) == value
    config = ConsumerConfig.from_options(
        {name: spec.parse(text, name), **({"engine": "async"} if name == "handler_timeout" else {})}
    )
    assert getattr(config, name) == (value if name != "concurrency" or value else 64)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("concurrency", "many", "concurrency='many' is not valid; expected a whole number"),
        ("commit_interval", "soon", "expected a number of seconds"),
        ("handle_signals", "perhaps", "expected true or false"),
        ("on_failure", "print", "on_failure cannot be set from text"),
    ],
)
def test_bad_text_values_name_the_option(name: str, text: str, expected: str) -> None:
    with pytest.raises(laneway.ConfigError, match=expected):
        option_specs()[name].parse(text, name)


def test_an_unknown_option_suggests_the_closest_one() -> None:
    log = laneway.EmbeddedLog()
    log.create_topic("t")
    with pytest.raises(
        laneway.ConfigError, match="unknown option 'concurency'; did you mean 'concurrency'"
    ):
        laneway.Consumer(log.subscribe("t", "g"), lambda m: None, concurency=4)  # type: ignore[call-arg]


def test_a_config_built_directly_is_validated_too() -> None:
    with pytest.raises(laneway.ConfigError, match="max_buffered=0 is not valid"):
        ConsumerConfig(max_buffered=0)
    config = ConsumerConfig(engine="async")  # type: ignore[arg-type]
    assert config.engine is EngineKind.ASYNC and config.concurrency == 256
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.concurrency = 3  # type: ignore[misc]


def test_the_retry_policy_is_derived_from_the_retry_options() -> None:
    config = ConsumerConfig(
        engine="process",  # type: ignore[arg-type]
        max_retries=5,
        retry_backoff=0.2,
        retry_backoff_max=1.5,
        handler_timeout=3,
    )
    assert (config.retry.max_retries, config.retry.backoff) == (5, 0.2)
    assert (config.retry.backoff_max, config.retry.timeout) == (1.5, 3.0)
