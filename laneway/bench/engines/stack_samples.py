"""Stack samples of a running consumer, taken by py-spy, and the stage each one belongs to.

:class:`Sampler` attaches ``py-spy record`` to this process (and, with ``--subprocesses``,
to the process engine's workers) for the length of one run and reads back its raw stacks;
:func:`counts_of` counts the samples of the measured window by stage. The stages, the
rules that map a stack to one, and why a sampler is used are explained in
:mod:`laneway.bench.engines.stage_costs`, which (with its table) is the only user.
"""

from __future__ import annotations

import contextlib
import ctypes
import inspect
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import laneway
from laneway.bench.engines.raw import KafkaRawLoop

FETCH, LANES, DISPATCH, HANDLER = "fetch", "lane assignment", "dispatch", "handler call/completion"
OFFSETS, COMMIT, TALLY, PRODUCE = "offset tracking", "commit", "tally/stats", "produce"
CONTROL, BOOKKEEPING = "control loop", "loop bookkeeping"
STAGES = (FETCH, LANES, DISPATCH, HANDLER, OFFSETS, COMMIT, TALLY, PRODUCE, CONTROL)
"""A consumer's stages, in the order of the table (every stage has a row, used or not)."""
RAW_STAGES = (FETCH, BOOKKEEPING, PRODUCE)
"""The bare client loop's: the client's poll, recording each message, writing results."""

PACKAGE = Path(laneway.__file__).resolve().parent
HANDLER_MODULE = "bench/engines/stage_costs.py"
"""Where the measured handlers live: their frames are the handler stage."""
RAW_MODULE = "bench/engines/raw.py"

WINDOWS = {("consumer.py", "run"), (RAW_MODULE, "run"), ("engines/process/worker.py", "_serve")}
"""A process's main thread is counted only inside one of these frames (a consumer's run, the
bare loop's run, a worker's serving loop): setup, production of the backlog and a worker's
start-up (imports) are not the consumer's per-message work. Frames are named by module
and function name without its class: py-spy gives no class on Python 3.10."""

COMMIT_FRAMES = {("control/plane.py", "_commit_or_warn")}
PRODUCE_FRAMES = {
    (RAW_MODULE, "_write"),
    (RAW_MODULE, "_finish_writes"),
    ("sources/embedded/log.py", "produce_many"),
}
TALLY_FRAMES = {("control/plane.py", "_sample")}
COMMIT_MODULES = ("sources/kafka/commits.py",)
PRODUCE_MODULES = (
    "producing/",
    "sources/kafka/producer.py",
    "sources/kafka/transactions.py",
    "sources/embedded/producer.py",
    "sources/embedded/transactions.py",
)
MODULE_STAGES: tuple[tuple[str, str], ...] = (
    ("sources/", FETCH),
    ("types.py", FETCH),
    ("engines/lanes.py", LANES),
    ("engines/process/placement.py", LANES),
    ("engines/process/reply.py", HANDLER),
    ("engines/process/rows.py", HANDLER),
    ("engines/process/revocable.py", HANDLER),
    ("engines/process/", DISPATCH),
    ("engines/sync.py", DISPATCH),
    ("engines/thread.py", DISPATCH),
    ("engines/async_engine.py", DISPATCH),
    ("engines/event_loops.py", DISPATCH),
    ("engines/", HANDLER),
    ("results.py", HANDLER),
    ("retry.py", HANDLER),
    (HANDLER_MODULE, HANDLER),
    ("offsets/", OFFSETS),
    ("control/tally.py", TALLY),
    ("control/backlog.py", TALLY),
    ("control/stalls.py", TALLY),
    ("stats.py", TALLY),
    ("metrics.py", TALLY),
    ("observability/", TALLY),
    (RAW_MODULE, BOOKKEEPING),
    ("bench/engines/workloads.py", BOOKKEEPING),
)
"""The stage of a sample's innermost laneway frame, by module (the first prefix that
matches); any other laneway module is the control loop."""

_PROCESS = re.compile(r'process (\d+):"[^"]*";')
_THREAD = re.compile(r"thread \(\w+\)(?::[^;]*)?;")
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>.*):(?P<line>\d+)\)$")
PR_SET_PTRACER, PR_SET_PTRACER_ANY = 0x59616D61, ctypes.c_ulong(-1)
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Frame:
    """One frame of a sample: ``module`` is its file relative to the laneway package
    (``None``: not laneway's), ``function`` its qualified name."""

    module: str | None
    function: str
    line: int

    @property
    def key(self) -> tuple[str | None, str]:
        """``(module, function name without its class)``."""
        return self.module, self.function.rsplit(".", 1)[-1]


@dataclass
class StageCounts:
    """Samples per stage of one run, and per innermost laneway function (``--top``)."""

    stages: Counter[str] = field(default_factory=Counter)
    functions: Counter[str] = field(default_factory=Counter)
    in_workers: int = 0
    """Of them, the samples taken in worker processes (the process engine)."""
    skipped: int = 0
    """Samples outside the measured window (setup, start-up) or of other threads."""

    @property
    def counted(self) -> int:
        return sum(self.stages.values())


def _module_of(path: str) -> str | None:
    try:
        return Path(path).resolve().relative_to(PACKAGE).as_posix()
    except ValueError:
        return None


def parse_stack(stack: str) -> tuple[int, bool, list[Frame]]:
    """``(process depth, main thread?, frames root first)`` of one line of ``py-spy record
    --format raw --subprocesses --threads --full-filenames`` (its count removed)."""
    pids: list[int] = []
    rest = stack
    while match := _PROCESS.match(rest):
        pids.append(int(match.group(1)))
        rest = rest[match.end() :]
    thread = _THREAD.match(rest)
    if thread is not None:
        rest = rest[thread.end() :]
    frames = []
    for text in rest.split(";"):
        match = _FRAME.match(text)
        if match is not None:
            module = _module_of(match.group("file"))
            frames.append(Frame(module, match.group("function"), int(match.group("line"))))
    # Not by thread id: py-spy gives Python 3.10's as pthread addresses, not native ids.
    spawned = bool(frames) and frames[0].key == (None, "_bootstrap")
    return len(pids), not spawned, frames


def _consume_line() -> int | None:
    """The line of the bare Kafka loop's ``consume()`` call: time on it is the client's poll."""
    lines, first = inspect.getsourcelines(KafkaRawLoop._fetch)
    found = [first + i for i, text in enumerate(lines) if ".consume(" in text]
    return found[0] if found else None


CONSUME_LINE = _consume_line()


def stage_of(frames: Sequence[Frame]) -> tuple[str, str] | None:
    """The stage of a sample and its innermost laneway function, ``None`` if no laneway
    frame is on the stack (see the rules in :mod:`laneway.bench.engines.stage_costs`)."""
    ours = [f for f in frames if f.module is not None]
    if not ours:
        return None
    inner = ours[-1]
    assert inner.module is not None
    where = f"{inner.module}:{inner.function}"
    keys = {f.key for f in ours}
    modules = [f.module for f in ours if f.module is not None]
    if keys & COMMIT_FRAMES or any(m.startswith(COMMIT_MODULES) for m in modules):
        return COMMIT, where
    if keys & PRODUCE_FRAMES or any(m.startswith(PRODUCE_MODULES) for m in modules):
        return PRODUCE, where
    if keys & TALLY_FRAMES:
        return TALLY, where
    if inner.module == RAW_MODULE and inner.line == CONSUME_LINE:
        return FETCH, where
    for prefix, stage in MODULE_STAGES:
        if inner.module.startswith(prefix):
            return stage, where
    return CONTROL, where


def counts_of(raw: Iterator[str]) -> StageCounts:
    """Count the lines of a py-spy raw file (``stack count``) by stage.

    Counted: a main thread inside one of :data:`WINDOWS`, and every other thread (its root
    frame is threading's ``_bootstrap``) with a laneway frame outside the bench (engine
    threads, the stall watch, a worker's receiver).
    """
    found = StageCounts()
    for line in raw:
        stack, _, number = line.rstrip("\n").rpartition(" ")
        if not number.isdigit():
            continue
        count = int(number)
        depth, main, frames = parse_stack(stack)
        keys = {f.key for f in frames}
        if main:
            measured = bool(keys & WINDOWS)
        else:
            measured = any(f.module and not f.module.startswith("bench/") for f in frames)
        attributed = stage_of(frames) if measured else None
        if attributed is None:
            found.skipped += count
            continue
        stage, where = attributed
        found.stages[stage] += count
        found.functions[where] += count
        if depth > 1:
            found.in_workers += count
    return found


def py_spy() -> str:
    """The py-spy executable (beside this Python's, else on ``PATH``)."""
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise RuntimeError(
            "py-spy is not installed: pip install 'laneway[bench]' (or pip install py-spy)"
        )
    return found


def py_spy_version() -> str:
    done = subprocess.run([py_spy(), "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip().removeprefix("py-spy ")


def _allow_tracing() -> None:
    """Let a child (py-spy) trace this process where Yama's ptrace_scope is 1 (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0)


class Sampler:
    """``py-spy record`` attached to this process and its children while in the ``with``.

    ``rate`` samples a second, each the stack of the thread holding the GIL in each process
    (``--gil``: the Python code running at that instant; a thread waiting for a lock, the
    GIL or the network is never sampled), read without pausing the process
    (``--nonblocking``: pausing it for every sample slowed the thread engine's run six-fold,
    and its thread wake-ups with it). A stack read while it changes is dropped by py-spy
    (its "Errors": a few percent).
    """

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self.counts = StageCounts()
        self._directory = Path(tempfile.mkdtemp(prefix="laneway-stage-costs-"))
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Sampler:
        _allow_tracing()
        out, err = self._directory / "stacks.txt", self._directory / "py-spy.log"
        command = [
            py_spy(), "record", "--pid", str(os.getpid()), "--rate", str(self.rate),
            "--format", "raw", "--output", str(out), "--subprocesses", "--threads",
            "--full-filenames", "--gil", "--nonblocking",
        ]  # fmt: skip
        with err.open("wb") as log:  # a file, not a pipe: py-spy must never block on it
            self._process = subprocess.Popen(command, stdout=log, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT_S
        while b"Sampling process" not in err.read_bytes():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self._process.kill()
                said = err.read_text(errors="replace").strip()
                shutil.rmtree(self._directory, ignore_errors=True)
                raise RuntimeError(
                    f"py-spy could not sample process {os.getpid()} (it needs ptrace "
                    f"permission: root, CAP_SYS_PTRACE or kernel.yama.ptrace_scope <= 1): "
                    f"{said}"
                )
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        process = self._process
        assert process is not None
        process.send_signal(signal.SIGINT)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        out = self._directory / "stacks.txt"
        if out.exists():
            with out.open(encoding="utf-8", errors="replace") as raw:
                self.counts = counts_of(raw)
        shutil.rmtree(self._directory, ignore_errors=True)
