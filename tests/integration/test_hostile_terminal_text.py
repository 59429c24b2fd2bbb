"""No control character from the log, the group or a member reaches the operator's
terminal: ``laneway dlq``, ``top``, ``lag`` and ``status`` on a pseudo-terminal, against
the real broker, with a dead-letter topic that a laneway consumer wrote (an error whose
type and message carry CSI and OSC sequences) and a letter a test producer forged, and
members whose answers carry them; and ``laneway run``'s log lines, whose errors quote them.

Before: ``dlq list`` and ``dlq show`` printed them as they came, so a letter cleared the
screen (``ESC[2J``), set the window title (``ESC]0;...BEL``) or wrote a line of its own;
``top`` printed a member's labels and errors the same way.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from checkout import ROOT
from hostile_app import CLEAR, TITLE, HostileError
from kafka_helpers import create_topic, produce, unique_name
from ops_cli import command, environment
from service_runs import SUPPORT
from terminal import Ran, active_sequences, on_terminal

import laneway as lw
from laneway.types import Message

FAST = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}


def laneway_on_terminal(*args: str, cwd: Path, interrupt_after: float | None = None) -> Ran:
    return on_terminal(command(*args), cwd=cwd, env=environment(), interrupt_after=interrupt_after)


def assert_inert(ran: Ran, *escaped: str) -> None:
    """Nothing a terminal acts on, and each of ``escaped`` shown as text."""
    assert active_sequences(ran.output) == [], ran.output
    for text in escaped:
        assert text in ran.text, (text, ran.text)


@pytest.fixture(scope="module")
def letters(kafka_bootstrap: str) -> dict[str, str]:
    """A topic, its dead-letter topic (three letters from laneway, one forged) and the
    group that wrote them."""
    topic, group = unique_name("hostile"), unique_name("hostile-group")
    create_topic(kafka_bootstrap, topic, 2)
    produce(kafka_bootstrap, topic, [(b"k%d" % i, b"v%d" % i) for i in range(6)])

    def handle(message: Message) -> None:
        if message.offset % 2 == 0:
            raise HostileError(f"amount {CLEAR}rejected{TITLE}\nlaneway.attempts: 0")

    source = lw.KafkaSource(kafka_bootstrap, group, [topic], FAST)
    lw.Consumer(source, handle, max_retries=0, handle_signals=False).run(max_messages=6)
    forged = [
        ("laneway.error.type", f"Forged\u009b31m{CLEAR}".encode()),
        ("laneway.error.message", f"\u202eevil{TITLE}".encode()),
        ("laneway.error.traceback", f"line 1\r{CLEAR}\nline 2{TITLE}".encode()),
        ("laneway.original.topic", f"{topic}{TITLE}".encode()),
        ("laneway.original.partition", b"0"),
        (f"laneway.error.{CLEAR}x", b"y"),
        (f"x-own{TITLE}", f"{CLEAR}".encode()),
    ]
    produce(kafka_bootstrap, f"{topic}.dlq", [(f"k{CLEAR}".encode(), b"v", forged)])
    return {"bootstrap": kafka_bootstrap, "topic": topic, "group": group}


@pytest.mark.kafka
def test_dlq_list_and_show_print_escapes_not_sequences(
    letters: dict[str, str], tmp_path: Path
) -> None:
    where = ("--bootstrap-servers", letters["bootstrap"], "--topic", letters["topic"] + ".dlq")
    listed = laneway_on_terminal("dlq", "list", *where, cwd=tmp_path)
    assert listed.code == 0, listed.text
    assert_inert(listed, "Bad\\x1b]0;owned\\x07Error", "Forged\\x9b31m\\x1b[2J")
    by_message = laneway_on_terminal("dlq", "list", *where, "--by", "message", cwd=tmp_path)
    assert_inert(by_message, "amount \\x1b[2Jrejected\\x1b]0;owned\\x07", "\\u202eevil")
    shown = laneway_on_terminal("dlq", "show", *where, "--traceback", "--values", cwd=tmp_path)
    assert shown.code == 0, shown.text
    assert_inert(
        shown,
        "laneway.error.type: Bad\\x1b]0;owned\\x07Error",
        "laneway.error.\\x1b[2Jx: y",
        "x-own\\x1b]0;owned\\x07: b'\\x1b[2J'",
        "    line 2\\x1b]0;owned\\x07",  # a traceback's lines are indented: none forged
    )
    lines = shown.text.splitlines()
    assert not [line for line in lines if line.startswith("laneway.attempts")], shown.text
    replay = laneway_on_terminal("dlq", "replay", *where, "--dry-run", cwd=tmp_path)
    assert_inert(replay, "\\x1b]0;owned\\x07")


@pytest.mark.kafka
def test_dlq_json_stays_valid_and_keeps_the_text(letters: dict[str, str], tmp_path: Path) -> None:
    where = ("--bootstrap-servers", letters["bootstrap"], "--topic", letters["topic"] + ".dlq")
    ran = laneway_on_terminal("dlq", "list", *where, "--by", "message", "--json", cwd=tmp_path)
    assert active_sequences(ran.output) == []
    document = json.loads(ran.output.replace(b"\r\n", b"\n"))
    types = {group["error_type"] for group in document["groups"]}
    assert types == {HostileError.__name__, f"Forged\u009b31m{CLEAR}"}


class Member(BaseHTTPRequestHandler):
    """A member whose ``/metrics`` labels a restoring partition with OSC and CSI
    sequences, and whose ``/status.json`` says what laneway status must not echo raw."""

    def do_GET(self) -> None:
        if self.path == "/metrics":
            body = (
                "laneway_state_restoring_partitions 1\n"
                f'laneway_state_restore_remaining_records{{topic="t{TITLE}{CLEAR}",'
                'partition="0"} 5\n'
            ).encode()
        else:
            body = json.dumps({"kind": "member", "error": f"x{TITLE}"}, ensure_ascii=False)
            body = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def members() -> Iterator[tuple[str, str]]:
    """A hostile member's address, and one that fails with a hostile reason phrase."""
    member = ThreadingHTTPServer(("127.0.0.1", 0), Member)
    threading.Thread(target=member.serve_forever, daemon=True).start()
    failing = socket.create_server(("127.0.0.1", 0))

    def refuse() -> None:
        while True:
            try:
                connection, _ = failing.accept()
            except OSError:
                return
            with connection:
                connection.recv(4096)
                connection.sendall(f"HTTP/1.0 503 busy{TITLE}{CLEAR}\r\n\r\n".encode())

    threading.Thread(target=refuse, daemon=True).start()
    yield f"127.0.0.1:{member.server_address[1]}", f"127.0.0.1:{failing.getsockname()[1]}"
    member.shutdown()
    failing.close()


@pytest.mark.kafka
def test_top_prints_a_members_labels_and_errors_as_escapes(
    letters: dict[str, str], members: tuple[str, str], tmp_path: Path
) -> None:
    member, failing = members
    group = ("--bootstrap-servers", letters["bootstrap"], "--group", letters["group"])
    asked = ("--metrics", member, "--metrics", failing, "--interval", "0.5")
    once = laneway_on_terminal("top", *group, *asked, "--once", cwd=tmp_path)
    assert once.code == 0, once.text
    assert_inert(once, "t\\x1b]0;owned\\x07\\x1b[2J[0] 5", "busy\\x1b]0;owned\\x07\\x1b[2J")
    live = laneway_on_terminal("top", *group, *asked, cwd=tmp_path, interrupt_after=4)
    # rich draws with sequences of its own; none of the members' may pass
    assert b"\x1b]" not in live.output and b"\x07" not in live.output
    assert CLEAR.encode() not in live.output
    assert "t\\x1b]0;owned\\x07\\x1b[2J[0] 5" in live.text


@pytest.mark.kafka
def test_lag_and_status_and_their_error_lines_print_no_sequence(
    letters: dict[str, str], members: tuple[str, str], tmp_path: Path
) -> None:
    bootstrap = ("--bootstrap-servers", letters["bootstrap"])
    lag = laneway_on_terminal("lag", *bootstrap, "--group", letters["group"], cwd=tmp_path)
    assert lag.code == 0 and letters["topic"] in lag.text, lag.text
    assert_inert(lag)
    unknown = laneway_on_terminal("lag", *bootstrap, "--group", f"g{TITLE}", cwd=tmp_path)
    assert unknown.code == 3
    assert_inert(unknown, "laneway lag: error: unknown group")
    member, failing = members
    status = laneway_on_terminal(
        "status", *bootstrap, "--group", letters["group"], "--member", member,
        "--member", failing, "--interval", "0.2", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert status.code == 0, status.text
    assert active_sequences(status.output) == []
    document = json.loads(status.output.replace(b"\r\n", b"\n"))
    errors = [row.get("error") for row in document["members"]]
    assert errors == [f"x{TITLE}", f"busy{TITLE}{CLEAR}"]  # kept, JSON-escaped


def test_laneway_runs_log_lines_print_no_sequence(tmp_path: Path) -> None:
    # Before: "handler failed on orders[0]@0 ...: Bad<OSC>Error: amount <CSI>..." set the
    # title and cleared the screen of whoever read the log, and its newline forged a line.
    log = lw.EmbeddedLog(tmp_path / "log")
    log.create_topic("orders", partitions=1)
    log.produce("orders", b"v", key=f"k{CLEAR}".encode())
    log.close()
    ran = on_terminal(
        command("run", "hostile_app:handle", "--log-dir", "log", "--topic", "orders",
                "--group", "g", "--max-retries", "0", "--health-show-keys"),
        cwd=tmp_path, env=environment({"PYTHONPATH": f"{SUPPORT}{os.pathsep}{ROOT}"}),
        interrupt_after=6,
    )  # fmt: skip
    assert "handler failed on orders[0]@0" in ran.text, ran.text
    assert_inert(ran, "Bad\\x1b]0;owned\\x07Error: amount \\x1b[2Jrejected")
    assert not [line for line in ran.text.splitlines() if line.startswith("2026-01-01")]
