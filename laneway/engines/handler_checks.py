"""What makes a callable usable as a handler by an engine, checked before anything runs."""

from __future__ import annotations

import inspect
import pickle
import sys
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from laneway.engines.lifecycle import Lifecycle
from laneway.errors import ConfigError, HandlerImportError
from laneway.options import EngineKind
from laneway.types import Message


def is_async_handler(handler: Callable[..., Any]) -> bool:
    """True for ``async def`` functions and objects whose ``__call__`` is ``async def``."""
    call = type(handler).__call__ if not inspect.isroutine(handler) else handler
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def check_handler(
    handler: object, engine: EngineKind, batched: bool = False, stateful: bool = False
) -> None:
    """Raise ConfigError when ``handler`` cannot run on ``engine``: not callable, a
    signature that cannot take one message, a parameter annotated as a list of messages
    without ``batch_size`` (or as one message with it), sync vs ``async def`` mismatched
    with the engine, or (process engine) not importable by name in a worker process."""
    if not callable(handler):
        raise ConfigError(f"handler={handler!r} is not valid; expected a callable taking a Message")
    _check_signature(handler, stateful)
    _check_batch_shape(handler, batched)
    is_async = is_async_handler(handler)
    if engine is EngineKind.ASYNC and not is_async:
        raise ConfigError(
            "handler is a plain function but engine='async' needs an 'async def' handler; "
            "use engine='thread' for blocking handlers"
        )
    if engine is not EngineKind.ASYNC and is_async:
        raise ConfigError(
            f"handler is 'async def' but engine={engine.value!r} calls it synchronously; "
            "use engine='async'"
        )
    Lifecycle.of(handler).check(handler, runs_async=engine is EngineKind.ASYNC)
    if engine is EngineKind.PROCESS:
        check_importable(handler)


def _check_signature(handler: Callable[..., Any], stateful: bool) -> None:
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        return  # some builtins have no signature to check
    if stateful:
        try:
            signature.bind(None, None)
        except TypeError:
            parameters = ", ".join(signature.parameters)
            raise ConfigError(
                f"handler {describe_handler(handler)}({parameters}) cannot be called with a "
                "message and its state; with state= a handler takes two arguments, "
                "(message, state) (a batch handler: (messages, states))"
            ) from None
        return
    try:
        signature.bind(None)
    except TypeError:
        parameters = ", ".join(signature.parameters)
        if _takes_two(signature):
            raise ConfigError(
                f"handler {describe_handler(handler)}({parameters}) takes a message and its "
                "state, but the consumer has no state store: pass state=laneway.StateStore("
                "DIR, changelog=TOPIC) (laneway run --state-dir DIR --state-changelog TOPIC), "
                "or give the handler one argument, the Message"
            ) from None
        raise ConfigError(
            f"handler {describe_handler(handler)}({parameters}) cannot be called with one "
            "message; a handler takes exactly one argument, the Message (wrap extra "
            "arguments with functools.partial)"
        ) from None


def _takes_two(signature: inspect.Signature) -> bool:
    """Whether a handler's signature is that of a stateful one: two parameters, the second
    named ``state``/``states`` or annotated ``State``/``States``."""
    try:
        signature.bind(None, None)
    except TypeError:
        return False
    parameters = list(signature.parameters.values())
    if len(parameters) != 2:
        return False
    second = parameters[1]
    annotation = second.annotation
    shown = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return second.name in ("state", "states") or str(shown).split("[")[0].endswith(
        ("State", "States")
    )


def _check_batch_shape(handler: Callable[..., Any], batched: bool) -> None:
    takes_a_list = _annotated_as_batch(handler)
    if takes_a_list is None or takes_a_list == batched:
        return
    name = describe_handler(handler)
    if takes_a_list:
        raise ConfigError(
            f"handler {name} takes a list of messages (its parameter's annotation) but "
            "batch_size is not set, so it would be called with one Message; pass "
            "batch_size=N (and batch_wait) to get lists"
        )
    raise ConfigError(
        f"handler {name} takes one Message (its parameter's annotation) but batch_size is "
        "set, so it would be called with a list; drop batch_size or take a list"
    )


def _annotated_as_batch(handler: Callable[..., Any]) -> bool | None:
    """Whether the handler's parameter is annotated as a collection of messages (True) or
    as one :class:`Message` (False); None when unannotated or not resolvable."""
    try:
        parameters = list(inspect.signature(handler, eval_str=True).parameters.values())
    except Exception:  # annotations that do not resolve, builtins without a signature
        return None
    if not parameters:
        return None
    annotation = parameters[0].annotation
    if annotation is Message:
        return False
    origin = typing.get_origin(annotation)
    is_collection = isinstance(origin, type) and issubclass(origin, Iterable)
    if is_collection and origin is not tuple and typing.get_args(annotation) == (Message,):
        return True
    return None


def check_importable(handler: object) -> None:
    """Raise HandlerImportError unless a spawned worker process can load ``handler``: it
    must pickle (by name), and a function of ``__main__`` must come from a file the
    worker can run again (not an interactive session)."""
    name = describe_handler(handler)
    try:
        pickle.dumps(handler, protocol=5)
    except Exception as error:
        raise HandlerImportError(import_advice(name, f"it cannot be pickled: {error}")) from None
    main = sys.modules.get("__main__")
    module = getattr(handler, "__module__", None)
    if module == "__main__" and getattr(main, "__file__", None) is None:
        reason = "it is defined in an interactive session, which worker processes cannot import"
        raise HandlerImportError(import_advice(name, reason))


def describe_handler(handler: object) -> str:
    """A handler's importable name (``module.qualname``), or its repr."""
    if isinstance(handler, (types.FunctionType, types.BuiltinFunctionType, type)):
        return f"{handler.__module__}.{handler.__qualname__}"
    return repr(handler)


def import_advice(name: str, reason: str) -> str:
    """The text of a HandlerImportError for handler ``name``."""
    return (
        f"handler {name} cannot be used by the process engine: {reason}. It must be a "
        "module-level function importable by name (not a lambda, a nested function, or a "
        "function defined in an interactive session)"
    )
