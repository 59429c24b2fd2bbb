"""One engine's figures of ``python -m laneway.bench.engines.stage_costs``, and their table
(see :mod:`laneway.bench.engines.stage_costs` for what each figure is)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from laneway.bench.engines.stack_samples import RAW_STAGES, STAGES, StageCounts

RAW = "raw"
"""The bare client loop's name among the engines."""


@dataclass
class EngineCost:
    """One engine's (or the bare loop's) figures: the measured run and the sampled one."""

    engine: str
    messages: int
    cpu_s: float
    """Python-side CPU seconds of the measured run (workers included, client threads not)."""
    wall_s: float
    client_s: float
    workers_s: float
    samples: StageCounts = field(default_factory=StageCounts)

    @property
    def stages(self) -> tuple[str, ...]:
        return RAW_STAGES if self.engine == RAW else STAGES

    def share(self, stage: str) -> float:
        counted = self.samples.counted
        return self.samples.stages[stage] / counted if counted else 0.0

    def micros(self, stage: str) -> float:
        return self.share(stage) * self.per_message(self.cpu_s)

    def per_message(self, seconds: float) -> float:
        return seconds / self.messages * 1e6 if self.messages else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "messages": self.messages,
            "cpu_us_per_message": self.per_message(self.cpu_s),
            "wall_us_per_message": self.per_message(self.wall_s),
            "client_threads_us_per_message": self.per_message(self.client_s),
            "workers_us_per_message": self.per_message(self.workers_s),
            "samples": self.samples.counted,
            "samples_in_workers": self.samples.in_workers,
            "stages": {
                s: {"us_per_message": self.micros(s), "share": self.share(s)} for s in self.stages
            },
            "top_functions": dict(self.samples.functions.most_common(20)),
        }


def render(title: str, costs: list[EngineCost], raw: EngineCost | None, top: int) -> str:
    """The table (Markdown, aligned): a row per stage, a column per engine, each cell
    µs per message and (share); then the bare client loop's figures."""
    rows = [
        [stage, *[_cell(c, c.micros(stage), c.share(stage)) for c in costs]] for stage in STAGES
    ]
    rows += [
        ["total, CPU µs/msg", *[_cell(c, c.per_message(c.cpu_s), 1.0) for c in costs]],
        ["wall µs/msg", *[f"{c.per_message(c.wall_s):.3f}" for c in costs]],
        ["of the total, in workers", *[f"{c.per_message(c.workers_s):.3f}" for c in costs]],
        ["client threads, CPU µs/msg", *[f"{c.per_message(c.client_s):.3f}" for c in costs]],
        ["samples", *[str(c.samples.counted) for c in costs]],
    ]
    header = ["stage", *[c.engine for c in costs]]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [title, "", _row(header, widths)]
    lines.append(
        "| " + " | ".join(["-" * widths[0], *["-" * (w - 1) + ":" for w in widths[1:]]]) + " |"
    )
    lines += [_row(row, widths) for row in rows]
    if raw is not None:
        parts = ", ".join(
            f"{stage} {raw.micros(stage):.3f} ({raw.share(stage):.1%})"
            for stage in raw.stages
            if raw.samples.stages[stage]
        )
        lines += [
            "",
            f"bare client loop (laneway bench's raw engine): {raw.per_message(raw.cpu_s):.3f} "
            f"CPU µs/msg (wall {raw.per_message(raw.wall_s):.3f}, client threads "
            f"{raw.per_message(raw.client_s):.3f}){': ' if parts else ''}{parts}",
        ]
    for cost in ([*costs, raw] if raw is not None else costs) if top else []:
        lines.append(f"top functions, {cost.engine}:")
        counted = cost.samples.counted or 1
        for where, count in cost.samples.functions.most_common(top):
            lines.append(f"  {count / counted:6.1%}  {where}")
    return "\n".join(lines)


def _cell(cost: EngineCost, micros: float, share: float) -> str:
    return f"{micros:.3f} ({share:.1%})" if cost.samples.counted else f"{micros:.3f}"


def _row(cells: list[str], widths: list[int]) -> str:
    first, *rest = cells
    aligned = [first.ljust(widths[0]), *[c.rjust(w) for c, w in zip(rest, widths[1:], strict=True)]]
    return "| " + " | ".join(aligned) + " |"
