"""A type checker matches the handler to the engine before ConfigError does.

mypy runs (with the project's settings, so it is strict) on a small user module; every
line marked ``# rejected`` must be reported and no other line may be, so the overloads of
``Consumer.__init__`` neither let a mismatch through nor reject a correct program. The
typed module does the same for typed messages: a handler of ``Message[Order]`` fits a
``value_deserializer`` that makes an ``Order``, and nothing else.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from checkout import ROOT

USER_MODULE = """\
import laneway
from laneway.options import EngineKind

log = laneway.EmbeddedLog()
log.create_topic("orders", partitions=2)
source = log.subscribe(["orders"], group="billing")


def handle(message: laneway.Message) -> None:
    pass


async def handle_async(message: laneway.Message) -> None:
    pass


class Reserve:
    async def __call__(self, message: laneway.Message) -> None:
        pass


def untyped(message):  # type: ignore[no-untyped-def]
    pass


async def untyped_async(message):  # type: ignore[no-untyped-def]
    pass


def engine_from_settings() -> str:
    return "thread"


def apply(message: laneway.Message, state: laneway.State[int]) -> None:
    state.value = (state.value or 0) + 1


async def apply_async(message: laneway.Message, state: laneway.State[int]) -> None:
    state.value = 1


def apply_batch(messages: list[laneway.Message], states: laneway.States) -> None:
    pass


store = laneway.StateStore("./state", changelog="orders.state")


laneway.Consumer(source, handle)
laneway.Consumer(source, handle, engine="thread", concurrency=8, ordering="partition")
laneway.Consumer(source, handle, engine="sync")
laneway.Consumer(source, handle, engine="process")
laneway.Consumer(source, handle_async, engine="async", concurrency=256)
laneway.Consumer(source, Reserve(), engine="async")
laneway.Consumer(source, untyped, engine="async")
laneway.Consumer(source, lambda message: None, engine="thread")
laneway.Consumer(source, handle, engine=EngineKind(engine_from_settings()))
laneway.Consumer(source, handle_async, engine=EngineKind(engine_from_settings()))
laneway.Consumer(source, apply, state=store, engine="thread", ordering="key")
laneway.Consumer(source, apply_async, state=store, engine="async")
laneway.Consumer(source, apply_batch, state=store, batch_size=100)
laneway.Consumer(source, apply)  # rejected
laneway.Consumer(source, handle_async, engine="thread")  # rejected
laneway.Consumer(source, handle_async)  # rejected
laneway.Consumer(source, Reserve(), engine="process")  # rejected
laneway.Consumer(source, untyped_async, engine="sync")  # rejected
laneway.Consumer(source, handle, engine="async")  # rejected
laneway.Consumer(source, handle, engine="async", max_retries=5)  # rejected
laneway.Consumer(source, handle, engine="fast")  # rejected
laneway.Consumer(source, handle, concurency=3)  # rejected
laneway.Consumer(source, handle, ordering="random")  # rejected
"""


def mypy_errors(module: Path) -> dict[int, str]:
    """mypy's errors in ``module``, by line, with the project's configuration."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--no-error-summary",
            "--hide-error-context",
            # A cache of its own: a shared one may map the module name to another path.
            "--cache-dir",
            str(module.parent / ".mypy_cache"),
            str(module),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    errors: dict[int, str] = {}
    for line in done.stdout.splitlines():
        found = re.match(rf"{re.escape(str(module))}:(\d+): error: (.*)", line)
        if found:
            errors.setdefault(int(found.group(1)), found.group(2))
    return errors


def test_mypy_rejects_a_handler_that_does_not_fit_its_engine(tmp_path: Path) -> None:
    module = tmp_path / "user_app.py"
    module.write_text(USER_MODULE)
    rejected = {
        number
        for number, line in enumerate(USER_MODULE.splitlines(), start=1)
        if line.endswith("# rejected")
    }
    errors = mypy_errors(module)
    assert set(errors) == rejected, errors
    assert "Consumer" in errors[min(rejected)]


TYPED_MODULE = """\
import dataclasses

import msgspec

import laneway
from laneway import serde
from laneway.options import EngineKind

log = laneway.EmbeddedLog()
log.create_topic("orders", partitions=2)
source = log.subscribe(["orders"], group="billing")


class Order(msgspec.Struct):
    amount: int


@dataclasses.dataclass
class Invoice:
    total: int


def handle(message: laneway.Message) -> None:
    pass


def handle_order(message: laneway.Message[Order]) -> laneway.Produce:
    return laneway.Produce("out", Invoice(message.value.amount))


async def handle_order_async(message: laneway.Message[Order]) -> None:
    print(message.value.amount + 1)


def handle_keyed(message: laneway.Message[Order, str]) -> None:
    print(message.key.upper(), message.value.amount)


def handle_orders(messages: list[laneway.Message[Order]]) -> None:
    print(sum(message.value.amount for message in messages))


def handle_invoice(message: laneway.Message[Invoice]) -> None:
    print(message.value.total)


def handle_misread(message: laneway.Message[Order]) -> None:
    print(message.value.total)  # rejected


def handle_bytes(message: laneway.Message) -> None:
    print(message.value.amount)  # rejected


laneway.Consumer(source, handle_order, value_deserializer=serde.json(Order))
laneway.Consumer(source, handle_order, value_deserializer=serde.json(Order), engine="process")
laneway.Consumer(source, handle_order_async, engine="async", value_deserializer=serde.json(Order))
laneway.Consumer(
    source, handle_keyed, value_deserializer=serde.json(Order), key_deserializer=serde.text()
)
laneway.Consumer(source, handle_orders, value_deserializer=serde.json(Order), batch_size=10)
laneway.Consumer(source, handle_invoice, value_deserializer=serde.json(Invoice))
laneway.Consumer(source, handle_order, value_deserializer="json:user_models:Order")
laneway.Consumer(source, handle, value_serializer=serde.json(), key_serializer="str")
laneway.Consumer(
    source, handle_order, value_deserializer=serde.json(Order), value_serializer=serde.json()
)
laneway.Consumer(source, handle_order, engine=EngineKind("thread"), value_deserializer="json")
laneway.Produce("out", Invoice(1), value_serializer=serde.json(Invoice))
laneway.Consumer(source, handle_order)  # rejected
laneway.Consumer(source, handle_order, value_deserializer=serde.json(Invoice))  # rejected
laneway.Consumer(source, handle_keyed, value_deserializer=serde.json(Order))  # rejected
laneway.Consumer(source, handle, value_deserializer=serde.json(Order))  # rejected
laneway.Consumer(source, handle_order_async, value_deserializer=serde.json(Order))  # rejected
laneway.Consumer(source, handle_order, key_deserializer=serde.text())  # rejected
laneway.Consumer(source, handle_order, value_deserializer=serde.text())  # rejected
laneway.Consumer(source, handle_order, value_serializer=42)  # rejected
"""


def test_mypy_relates_the_deserializer_to_the_handlers_message_type(tmp_path: Path) -> None:
    module = tmp_path / "typed_app.py"
    module.write_text(TYPED_MODULE)
    rejected = {
        number
        for number, line in enumerate(TYPED_MODULE.splitlines(), start=1)
        if line.endswith("# rejected")
    }
    errors = mypy_errors(module)
    assert set(errors) == rejected, errors
    assert "total" in errors[min(rejected)]
