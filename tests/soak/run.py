"""The soak (``make soak``): laneway run members on the three-broker cluster for 30 minutes.

A steady producer writes 200 records a second (keys ``k0`` .. ``k99``, the produce time in
the value) to a fresh 6-partition topic, replicated three times; three ``laneway run``
members of one group (thread engine) handle them (``handler.py``: 2 ms each, a line per
record). Member 0 runs throughout; every three minutes member 1 or 2 is killed with
SIGKILL and started again; every ten minutes a broker is restarted (1, 2, 3 in turn).
Every 30 s each member's RSS is read. At the end the producer stops, the members drain
and are stopped with SIGTERM, and the report says:

* lost: records produced but never handled (must be 0);
* duplicates: handlings beyond one per record (kills replay what was not committed);
* p50/p99/max latency (produce -> done) of the records produced in each 5 minutes;
* RSS per member over time, and member 0's growth after a 5-minute warm-up (<= 10%).

Bootstrap: ``LANEWAY_CLUSTER`` (``scripts/with-services kafka-cluster`` sets it).
``SOAK_MINUTES`` (``make soak SOAK_MINUTES=10``) sets its length (the kill and restart
periods and the windows scale with it; below 30 the kills come more often than every three
minutes). The
report goes to stdout and, as JSON, to ``.soak/report.json``; exits 1 unless nothing was
lost and member 0 grew at most 10%.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

MINUTES = float(os.environ.get("SOAK_MINUTES", "30"))
RATE = 200
PARTITIONS = 6
MEMBERS = 3
KILL_EVERY_S = MINUTES * 60 / 10  # 3 minutes of 30
BROKER_EVERY_S = MINUTES * 60 / 3  # 10 minutes of 30
RSS_EVERY_S = 30.0
WINDOW_S = MINUTES * 60 / 6  # 5 minutes of 30
WARM_UP_S = WINDOW_S


def say(text: str) -> None:
    print(f"soak {time.strftime('%H:%M:%S')}: {text}", flush=True)


class Member:
    """One ``laneway run`` process slot; ``start`` makes a new life."""

    def __init__(self, slot: int, bootstrap: str, group: str, topic: str, out: Path) -> None:
        self.slot = slot
        self.command = [
            str(ROOT / ".venv" / "bin" / "laneway"), "run", "handler:handle",
            "--bootstrap-servers", bootstrap, "--group", group, "--topic", topic,
            "--engine", "thread", "--concurrency", "16", "--drain-timeout", "10",
            "--log-level", "warning",
        ]  # fmt: skip
        path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
        self.env = {**os.environ, "LANEWAY_SOAK_DIR": str(out), "PYTHONPATH": path}
        self.log = open(out / f"member-{slot}.stderr", "a")  # noqa: SIM115 - closed by stop()
        self.process: subprocess.Popen[bytes] | None = None
        self.lives = 0

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.command, env=self.env, stdout=self.log, stderr=self.log, cwd=HERE
        )
        self.lives += 1

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(120)
        self.log.close()
        return code

    def rss_mib(self) -> float | None:
        if self.process is None or self.process.poll() is not None:
            return None
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return None


def produce(bootstrap: str, topic: str, stop: threading.Event, count: list[int]) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 300_000,
        }
    )
    began = time.monotonic()
    sent = 0
    while not stop.is_set():
        now_ms = time.time_ns() // 1_000_000
        producer.produce(topic, f"{now_ms} {sent}".encode(), f"k{sent % 100}".encode())
        producer.poll(0)
        sent += 1
        ahead = began + sent / RATE - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    assert producer.flush(300) == 0, "records not acknowledged"
    count.append(sent)


def broker(command: str, broker_id: int) -> None:
    script = ROOT / "scripts" / "kafka"
    done = subprocess.run([sys.executable, str(script), command, str(broker_id)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    say(f"broker {broker_id} {command}: {done.stderr.strip().splitlines()[-1:]}")


Row = tuple[int, int, int, int, int]
"""partition, offset, produced (ms), sequence, done (ms) of one handling."""


def read_lines(out: Path) -> list[Row]:
    rows = []
    for path in out.glob("*.log"):
        lines = path.read_text().split("\n")
        for line in lines[:-1]:  # the last is "" or torn by a SIGKILL
            p, o, produced, sequence, done = line.split()
            rows.append((int(p), int(o), int(produced), int(sequence), int(done)))
    return rows


def percentile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0


def main() -> int:
    bootstrap = os.environ["LANEWAY_CLUSTER"]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = ROOT / ".soak" / stamp
    out.mkdir(parents=True)
    topic, group = f"soak-{stamp}", f"soak-group-{stamp}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3,
                   config={"min.insync.replicas": "2"})  # fmt: skip
    admin.create_topics([new])[topic].result(timeout=60)
    say(f"{MINUTES:g} min, {RATE}/s into {topic}, {MEMBERS} members of {group}")
    members = [Member(slot, bootstrap, group, topic, out) for slot in range(MEMBERS)]
    for member in members:
        member.start()
    stop = threading.Event()
    produced: list[int] = []
    producer = threading.Thread(target=produce, args=(bootstrap, topic, stop, produced))
    began = time.monotonic()
    producer.start()
    rss: dict[int, list[tuple[float, float]]] = defaultdict(list)
    events: list[tuple[float, str]] = []
    next_kill, next_broker, next_rss = KILL_EVERY_S, BROKER_EVERY_S, 0.0
    victim, broker_id = 1, 1
    while (elapsed := time.monotonic() - began) < MINUTES * 60:
        if elapsed >= next_rss:
            for member in members:
                value = member.rss_mib()
                if value is not None:
                    rss[member.slot].append((elapsed, value))
            next_rss += RSS_EVERY_S
        if elapsed >= next_kill:
            members[victim].kill()
            events.append((elapsed, f"member {victim} killed (SIGKILL)"))
            time.sleep(2.0)
            members[victim].start()
            say(f"member {victim} killed and started again")
            victim = 2 if victim == 1 else 1
            next_kill += KILL_EVERY_S
        if elapsed >= next_broker:
            events.append((elapsed, f"broker {broker_id} restarted"))
            restarting = threading.Thread(target=broker, args=("restart", broker_id))
            restarting.start()  # the kills and samples go on meanwhile
            broker_id = broker_id % 3 + 1
            next_broker += BROKER_EVERY_S
        time.sleep(1.0)
    stop.set()
    producer.join(600)
    total = produced[0]
    say(f"produced {total}; waiting for the members to drain")
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if len({row[3] for row in read_lines(out)}) >= total:
            break
        time.sleep(2.0)
    time.sleep(5.0)  # a last commit interval
    codes = [member.stop() for member in members]
    return report(out, total, read_lines(out), rss, events, codes, members)


def report(
    out: Path,
    total: int,
    rows: list[Row],
    rss: dict[int, list[tuple[float, float]]],
    events: list[tuple[float, str]],
    codes: list[int],
    members: list[Member],
) -> int:
    handled = Counter((p, o) for p, o, _, _, _ in rows)
    sequences = {row[3] for row in rows}
    lost = len(set(range(total)) - sequences)
    duplicates = sum(handled.values()) - len(handled)
    written_twice = len(handled) - len(sequences)
    first_produced = min((row[2] for row in rows), default=0)
    windows: dict[int, list[int]] = defaultdict(list)
    for _, _, produced, _, done in rows:
        windows[int((produced - first_produced) / 1000 // WINDOW_S)].append(done - produced)
    latency = [
        {
            "window": f"{w * WINDOW_S / 60:g}-{(w + 1) * WINDOW_S / 60:g} min",
            "records": len(v),
            "p50_ms": percentile(v, 0.5),
            "p99_ms": percentile(v, 0.99),
            "max_ms": max(v),
        }
        for w, v in sorted(windows.items())
    ]
    steady = [value for at, value in rss[0] if at >= WARM_UP_S]
    growth = (steady[-1] / steady[0] - 1) if len(steady) >= 2 else 0.0
    document = {
        "minutes": MINUTES, "rate": RATE, "produced": total, "lost": lost,
        "duplicates": duplicates, "written_twice_by_the_producer": written_twice,
        "latency": latency, "events": events,
        "rss_mib": {str(slot): series for slot, series in rss.items()},
        "member0_rss_growth_after_warm_up": round(growth, 4),
        "lives": [m.lives for m in members], "exit_codes": codes,
    }  # fmt: skip
    (out.parent / "report.json").write_text(json.dumps(document, indent=1))
    say(
        f"lost {lost}, duplicates {duplicates} of {total} records "
        f"({written_twice} written twice by the producer)"
    )
    for window in latency:
        say(f"latency {window['window']}: p50 {window['p50_ms']} ms, p99 {window['p99_ms']} ms, "
            f"max {window['max_ms']} ms ({window['records']} records)")  # fmt: skip
    for slot, series in sorted(rss.items()):
        shown = ", ".join(
            f"{at / 60:.0f}m {value:.0f}" for at, value in series[:: max(1, len(series) // 8)]
        )
        say(f"RSS MiB member {slot} ({members[slot].lives} lives): {shown}")
    say(f"member 0 RSS growth after {WARM_UP_S / 60:g} min warm-up: {growth:+.1%}")
    say(f"members' exit codes: {codes}; report: {out.parent / 'report.json'}")
    return 0 if lost == 0 and growth <= 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())
