"""``concurrency`` above ``max_buffered`` could never be used: an error when asked for, the
engine's default lowered to it otherwise."""

from __future__ import annotations

import pytest

from laneway.config import DEFAULT_CONCURRENCY, ConsumerConfig
from laneway.errors import ConfigError
from laneway.options import EngineKind


def test_asking_for_more_handlers_than_messages_buffered_is_an_error_naming_both() -> None:
    with pytest.raises(ConfigError) as raised:
        ConsumerConfig(engine=EngineKind.ASYNC, concurrency=300, max_buffered=200)
    message = str(raised.value)
    assert message.startswith("concurrency=300 is not valid with max_buffered=200")
    assert "no more than 200 handlers could ever run" in message


def test_as_many_handlers_as_messages_buffered_is_fine() -> None:
    config = ConsumerConfig(engine=EngineKind.THREAD, concurrency=50, max_buffered=50)
    assert config.concurrency == 50


@pytest.mark.parametrize("engine", list(EngineKind))
def test_an_engines_default_concurrency_fits_any_max_buffered(engine: EngineKind) -> None:
    assert ConsumerConfig(engine=engine).concurrency == DEFAULT_CONCURRENCY[engine]
    small = ConsumerConfig(engine=engine, max_buffered=1)
    assert small.concurrency == 1, "lowered, not an error: the user asked for neither"
    twenty = ConsumerConfig(engine=engine, max_buffered=20)
    assert twenty.concurrency == min(20, DEFAULT_CONCURRENCY[engine])
