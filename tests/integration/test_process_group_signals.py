"""The process engine under a SIGTERM to the whole process group.

systemd's default ``KillMode=control-group``, ``timeout``, a Kubernetes pod stopped through
a shell and ``kill -TERM -PGID`` signal every process of the group: the ``laneway run``
parent and its process-engine workers alike. The workers must leave the signal to the
parent, which drains them and closes each once (before, they died of it, were replaced
only to be closed, and their handler's ``close()`` never ran).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

from lifecycle_app import lines
from service_runs import SUPPORT, Service, wait_until

import laneway

TOPIC, GROUP, RECORDS, PARTITIONS = "orders", "billing", 400, 4


def write_log(directory: Path) -> None:
    with laneway.EmbeddedLog(directory) as log:
        log.create_topic(TOPIC, partitions=PARTITIONS)
        for i in range(RECORDS):
            log.produce(TOPIC, value=b"v", key=f"k{i % 16}".encode())


def handled_after_restart(directory: Path) -> list[tuple[int, int]]:
    """What a new member of the group handles: whatever the stopped one did not commit."""
    seen: list[tuple[int, int]] = []
    with laneway.EmbeddedLog(directory) as log:
        source = log.subscribe([TOPIC], GROUP)
        laneway.Consumer(
            source, lambda m: seen.append((m.partition, m.offset)), handle_signals=False
        ).run(idle_timeout=1.0)
    return seen


def test_a_process_group_sigterm_drains_and_closes_each_worker_once(tmp_path: Path) -> None:
    log_dir, out = tmp_path / "log", tmp_path / "out"
    out.mkdir()
    write_log(log_dir)
    service = Service(
        tmp_path,
        "lifecycle_app:handler",
        [SUPPORT],
        env={"LIFECYCLE_DIR": str(out), "LIFECYCLE_WORK_MS": "20"},
    )
    process = service.start(
        *("--log-dir", str(log_dir), "--topic", TOPIC, "--group", GROUP),
        *("--engine", "process", "--concurrency", "2", "--log-level", "info"),
    )
    wait_until(lambda: len(lines(out, "handled.log")) >= 40, 60, "messages being handled")

    os.killpg(process.pid, signal.SIGTERM)  # Service starts it in a session of its own
    output, _ = process.communicate(timeout=60)

    assert process.returncode == 0, output
    lifecycle = lines(out, "lifecycle.log")
    opened = [pid for what, pid in lifecycle if what == "open"]
    closed = [pid for what, pid in lifecycle if what == "close"]
    assert len(opened) == 2, lifecycle  # no worker was replaced
    assert Counter(closed) == Counter(opened), lifecycle  # each worker closed once
    assert "died" not in output and "restart" not in output, output
    handled = [(int(p), int(o)) for what, _, p, o in lines(out, "handled.log") if what == "done"]
    assert len(handled) == len(set(handled)), "a message ran twice"
    assert 0 < len(handled) < RECORDS
    # Everything it finished is committed: a new member handles exactly the rest.
    rest = handled_after_restart(log_dir)
    assert not set(rest) & set(handled)
    assert len(rest) + len(handled) == RECORDS


ABANDONED_ENGINE = textwrap.dedent(
    """
    import sys, time
    from laneway.engines.process.engine import ProcessEngine
    from laneway.engines.base import Completions
    from laneway.options import Ordering
    from lifecycle_app import handler

    if __name__ == "__main__":
        engine = ProcessEngine(handler, Ordering.KEY, 2)
        engine.start(Completions())
        print(" ".join(map(str, engine.worker_pids)), flush=True)
        sys.exit(0)  # never closed: multiprocessing's exit handler must not wait forever
    """
)


def test_workers_of_an_engine_nobody_closed_do_not_hold_the_exit(tmp_path: Path) -> None:
    script = tmp_path / "unclosed.py"
    script.write_text(ABANDONED_ENGINE)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")]),
    }
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - began < 30
    for pid in map(int, done.stdout.split()):
        wait_until(lambda pid=pid: not _alive(pid), 5, f"worker {pid} to be gone")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


ONE_MEMBER = textwrap.dedent(
    """
    import sys
    import laneway
    from lifecycle_app import handler

    if __name__ == "__main__":
        with laneway.EmbeddedLog() as log:
            log.create_topic("orders")
            log.produce("orders", value=b"slow")
            consumer = laneway.Consumer(log.subscribe(["orders"], "g"), handler, drain_timeout=20)
            stats = consumer.run()
        print("abandoned", stats.abandoned, "processed", stats.processed, flush=True)
    """
)


def run_signalled_twice(tmp_path: Path, gap: float) -> str:
    """A consumer whose only message takes 3 s, signalled twice ``gap`` seconds apart
    once the message runs; what it printed when it ended."""
    script = tmp_path / "member.py"
    script.write_text(ONE_MEMBER)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")]),
        "LIFECYCLE_DIR": str(tmp_path),
        "LIFECYCLE_SLOW_S": "3",
    }
    process = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        wait_until(lambda: bool(lines(tmp_path, "handled.log")), 30, "the message to start")
        process.send_signal(signal.SIGTERM)
        time.sleep(gap)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    finally:
        process.kill()
    return output


def test_the_same_sigterm_twice_is_one_stop(tmp_path: Path) -> None:
    # A SIGTERM to the process group (or systemd's cgroup) reaches a --members member
    # directly and forwarded by its supervisor: one request, not a second one that aborts.
    assert run_signalled_twice(tmp_path, gap=0.01).split() == ["abandoned", "0", "processed", "1"]


def test_a_second_sigterm_a_while_later_still_aborts_the_drain(tmp_path: Path) -> None:
    assert run_signalled_twice(tmp_path, gap=1.2).split() == ["abandoned", "1", "processed", "0"]
