"""The options reference page, generated from :class:`ConsumerConfig`.

One section per option group (a base class of :class:`ConsumerConfig`, one module of
:mod:`laneway.config` each), one entry per option: its default, how to set it from
``laneway run`` (flag and ``LANEWAY_*`` variable, or "in code only"), its allowed values,
what it does and how to tune it. ``docs/reference/options.md`` holds this text between
markers and a test keeps it equal; ``python -m laneway.config.reference`` prints it
(``scripts/generate-docs`` rewrites the page).
"""

from __future__ import annotations

import dataclasses
import inspect
import sys

from laneway.config.consumer_config import (
    ConsumerConfig,
    default_text,
    env_variable,
    option_specs,
)
from laneway.options import OptionSpec


def option_groups() -> list[type]:
    """The option groups of :class:`ConsumerConfig`, in documentation order."""
    return [
        base
        for base in reversed(ConsumerConfig.__mro__)
        if dataclasses.is_dataclass(base) and base is not ConsumerConfig
    ]


def options_page() -> str:
    """Every option as Markdown: a section per group, an entry per option."""
    specs = option_specs()
    sections = []
    for group in option_groups():
        module = sys.modules[group.__module__]
        title = group.__module__.rsplit(".", 1)[-1].capitalize()
        summary = inspect.cleandoc(module.__doc__ or "").split("\n\n", 1)[0].replace("\n", " ")
        own = [f for f in dataclasses.fields(group) if f.name in specs]
        lines = [f"## {title}", "", f"{summary} Module `{group.__module__}`.", ""]
        for field in own:
            lines += _entry(field.name, specs[field.name], field.default)
        sections.append("\n".join(lines).rstrip())
    return "\n\n".join(sections) + "\n"


def _entry(name: str, spec: OptionSpec, default: object) -> list[str]:
    dashed = name.replace("_", "-")
    flag = f"`--{dashed}` / `--no-{dashed}`" if spec.kind == "bool" else f"`--{dashed}`"
    setting = f"{flag}, `{env_variable(name)}`" if spec.from_text else "in code only"
    shown = spec.shown_default or f"`{default_text(spec, default)}`"
    facts = [f"default {shown}", setting]
    if spec.choices:
        facts.append("one of " + ", ".join(f"`{choice}`" for choice in spec.choices))
    first_word = spec.help.split(" ", 1)[0]
    text = (spec.help if first_word.endswith(")") else spec.help[0].upper() + spec.help[1:]) + "."
    lines = [f"### `{name}`", "", f"*{'; '.join(facts)}*", "", text, ""]
    if spec.tuning:
        lines += [f"**Tuning:** {spec.tuning}.", ""]
    return lines


if __name__ == "__main__":
    print(options_page(), end="")
