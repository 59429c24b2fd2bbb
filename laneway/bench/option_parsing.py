"""How ``laneway bench`` reads its options: lists of names and counts, topologies, the
extras an option needs; shared by the bench group and its subcommands."""

from __future__ import annotations

import importlib.util
import re
import urllib.parse
from collections.abc import Callable

import click

from laneway.bench.engines.key_spread import SPREADS
from laneway.bench.engines.pipelines import BATCH, BATCH_STATE, EXACTLY_ONCE, RESULTS, STATE
from laneway.bench.engines.scenarios import ORDERINGS
from laneway.bench.load.services import CHECKOUT_JAEGER
from laneway.bench.load.topologies import Topology, parse_topology

EXTRAS = ("rich", "hdrh", "matplotlib", "pyinstrument", "psutil")
POSTGRES_EXTRAS = ("asyncpg", "psycopg", "psycopg_pool")
"""What the spike and paced scenarios need besides the bench extra (``laneway[postgres]``)."""


def missing_extra(error: ModuleNotFoundError) -> click.ClickException:
    """The ClickException for a missing ``bench`` (or ``postgres``) extra; re-raise
    anything else."""
    package = (error.name or "").split(".")[0]
    if package in POSTGRES_EXTRAS:
        return click.ClickException(
            f"the spike and paced scenarios need {error.name!r}: pip install 'laneway[postgres]'"
        )
    if package not in EXTRAS:
        raise error
    return click.ClickException(
        f"laneway bench needs the optional dependency {error.name!r}: pip install 'laneway[bench]'"
    )


def topology_list(ctx: click.Context, param: click.Parameter, value: str) -> tuple[Topology, ...]:
    try:
        chosen = tuple(parse_topology(v) for v in value.split(",") if v.strip())
    except ValueError as error:
        raise click.BadParameter(str(error)) from error
    if not chosen:
        raise click.BadParameter("name at least one topology, e.g. 'async c64'")
    return chosen


def name_list(
    allowed: tuple[str, ...],
) -> Callable[[click.Context, click.Parameter, str], tuple[str, ...]]:
    def parse(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
        chosen = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
        unknown = [v for v in chosen if v not in allowed]
        if unknown or not chosen:
            raise click.BadParameter(
                f"{','.join(unknown) or repr(value)} is not allowed; choose from "
                f"{', '.join(allowed)} (comma-separated)"
            )
        return chosen

    return parse


def key_list(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[tuple[int, ...] | None, tuple[str, ...] | None]:
    """``--keys``: key counts and, as words, how keys spread over the messages (``uniform``,
    the default, and/or ``zipf``), e.g. ``100,1000,zipf``; either part may be left out."""
    if value is None:
        return None, None
    words = [v.strip().lower() for v in value.split(",") if v.strip()]
    spreads = tuple(dict.fromkeys(w for w in words if w in SPREADS))
    numbers = ",".join(w for w in words if w not in SPREADS)
    try:
        counts = count_list(ctx, param, numbers) if numbers else None
    except click.BadParameter:
        raise click.BadParameter(
            f"{value!r} is not valid; expected key counts from 1 to 1,000,000 and/or the "
            f"spreads {' or '.join(SPREADS)}, comma-separated (e.g. 100,zipf)"
        ) from None
    if counts is None and not spreads:
        raise click.BadParameter(f"{value!r} is not valid; name a key count or a spread")
    return counts, spreads or None


def work_grid(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[float, ...] | None:
    """``--work-ms``: one value, or a comma-separated grid (each run in turn)."""
    if value is None:
        return None
    try:
        grid = tuple(dict.fromkeys(float(v) for v in value.split(",") if v.strip()))
    except ValueError:
        grid = ()
    if not grid or any(not 0 <= v <= 10_000 for v in grid):
        raise click.BadParameter(
            f"{value!r} is not valid; expected milliseconds from 0 to 10,000, comma-separated "
            "(e.g. 0,0.1,1,10,100)"
        )
    return grid


def count_list(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        counts = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        counts = ()
    if not counts or any(c < 1 or c > 1_000_000 for c in counts):
        raise click.BadParameter(
            f"{value!r} is not valid; expected whole numbers from 1 to 1,000,000, "
            "comma-separated (e.g. 1,10,100)"
        )
    return counts


NEEDS = {
    "metrics": ("prometheus_client", "laneway[metrics]"),
    "otel-metrics": ("opentelemetry.sdk", "opentelemetry-sdk"),
    "tracing": ("opentelemetry.sdk", "opentelemetry-sdk"),
}
"""What each instrument imports, and what to install for it."""


def instruments_for(metrics: str | None, tracing: bool, status: bool = False) -> tuple[str, ...]:
    chosen = {None: (), "prometheus": ("metrics",), "otel": ("otel-metrics",)}[metrics]
    chosen += ("tracing",) if tracing else ()
    for name in chosen:
        module, extra = NEEDS[name]
        if importlib.util.find_spec(module.split(".")[0]) is None or (
            "." in module and importlib.util.find_spec(module) is None
        ):
            flag = "tracing" if name == "tracing" else "metrics"
            raise click.UsageError(f"--{flag} needs {module}: pip install '{extra}'")
    return chosen + (("status",) if status else ())


def http_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An ``http(s)://HOST:PORT[/PATH]`` URL without its trailing slash (``--otlp-endpoint``,
    ``--jaeger``)."""
    if value is None:
        return None
    parsed = urllib.parse.urlsplit(value.strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise click.BadParameter(
            f"{value!r} is not valid; expected an http:// or https:// URL, e.g. "
            "http://127.0.0.1:4318 (scripts/jaeger status prints Jaeger's)"
        )
    return value.strip().rstrip("/")


def jaeger_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--jaeger``: ``auto`` or Jaeger's query URL (see :func:`http_url`)."""
    if value is not None and value.strip() == CHECKOUT_JAEGER:
        return CHECKOUT_JAEGER
    return http_url(ctx, param, value)


def tracing_backend(loads: tuple[str, ...], otlp_endpoint: str | None, jaeger: str | None) -> None:
    """Check ``--otlp-endpoint`` and ``--jaeger``: for spike and paced, the second reads
    back what the first exported (``--jaeger auto`` names both), and the first needs the
    OTLP exporter."""
    if (otlp_endpoint or jaeger) and not loads:
        flag = "--otlp-endpoint" if otlp_endpoint else "--jaeger"
        raise click.UsageError(f"{flag} is for the spike and paced scenarios: add one of them")
    if jaeger == CHECKOUT_JAEGER:
        if otlp_endpoint:
            raise click.UsageError(
                "--jaeger auto exports to the checkout's Jaeger: leave out --otlp-endpoint"
            )
        otlp_endpoint = "the checkout's"
    if jaeger and not otlp_endpoint:
        raise click.UsageError(
            "--jaeger reads back the traces --otlp-endpoint exports: give both (the OTLP/HTTP "
            "endpoint and the query URL of the same Jaeger)"
        )
    if otlp_endpoint and not _importable("opentelemetry.exporter.otlp.proto.http"):
        raise click.UsageError(
            "--otlp-endpoint needs the OTLP exporter: pip install 'laneway[otlp]'"
        )


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def pipelines_for(batch_size: int | None, results: bool, state: bool) -> tuple[str, ...]:
    chosen: tuple[str, ...] = (BATCH,) if batch_size is not None else ()
    chosen += (RESULTS, EXACTLY_ONCE) if results else ()
    chosen += (STATE,) if state else ()
    return chosen + ((BATCH_STATE,) if state and batch_size is not None else ())


def topic_prefix_of(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", value):
        raise click.BadParameter(
            f"{value!r} is not valid; use 1-200 ASCII letters, digits, '.', '_' or '-'"
        )
    return value


def ordering_list(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[str, ...] | None:
    return None if value is None else name_list(ORDERINGS)(ctx, param, value)
