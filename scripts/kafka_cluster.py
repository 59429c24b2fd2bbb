"""The three-broker KRaft cluster of scripts/kafka (`scripts/kafka start --brokers 3`).

Each node is a broker and a controller in one JVM (a three-voter quorum, so any one node may
be down), on its own free 127.0.0.1 ports, with its storage, configuration, log and pid under
.kafka/cluster/node-<id>. Only PLAINTEXT listeners (the secured listener is the single
node's). Topics are replicated three times by default (`default.replication.factor=3`,
`min.insync.replicas=1` unless a topic asks for more, e.g. 2), and so are the group offsets,
transaction and share-group state topics (their minimum ISR is 2; with fewer brokers, as
many copies as there are).

Group sessions may be short: the broker's floors for KIP-848 groups are lowered
(`group.consumer.min.session.timeout.ms=6000`, `group.consumer.min.heartbeat.interval.ms=500`)
so that a test can give its group a 6 s session (`consumer.session.timeout.ms`, a group
config); Kafka's defaults (45 s, 5 s) apply otherwise.

A broker gives up on a controller that does not answer after 5 s
(`controller.socket.timeout.ms`, Kafka's default 30 s): with a frozen active controller, the
brokers' requests for producer-id blocks wait that long before they go to the new one, and
new idempotent producers wait with them (docs/concepts/rebalances.md).

Heap: KAFKA_HEAP_OPTS, else `-Xms256m -Xmx512m` per node (three JVMs share a small machine).

This module is loaded by scripts/kafka, which hands it its own module (the helpers for one
broker: jars, ports, probes, launching and stopping a JVM) as ``base``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

CLUSTER_HEAP = "-Xms256m -Xmx512m"
MAX_BROKERS = 5


@dataclass(frozen=True)
class Node:
    """One node of the cluster: its id, PLAINTEXT and controller ports, and its folder."""

    id: int
    port: int
    controller_port: int
    home: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config(self) -> Path:
        return self.home / "server.properties"

    @property
    def log(self) -> Path:
        return self.home / "server.log"

    @property
    def pid_file(self) -> Path:
        return self.home / "pid"

    def pid(self) -> int:
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return 0


class Cluster:
    """The cluster of this checkout, described by .kafka/cluster/nodes.json."""

    def __init__(self, base: ModuleType) -> None:
        self.base = base
        self.root: Path = base.STATE / "cluster"
        self.layout = self.root / "nodes.json"

    # ------------------------------------------------------------------ description

    def nodes(self) -> list[Node]:
        try:
            document = json.loads(self.layout.read_text())
        except (OSError, ValueError):
            return []
        nodes = []
        for entry in document["nodes"]:
            node_id = int(entry["id"])
            home = self.root / f"node-{node_id}"
            nodes.append(Node(node_id, int(entry["port"]), int(entry["controller_port"]), home))
        return nodes

    def node(self, node_id: str) -> Node:
        for node in self.nodes():
            if str(node.id) == node_id:
                return node
        known = ", ".join(str(n.id) for n in self.nodes()) or "none: start one with --brokers 3"
        raise self.base.ScriptError(f"no broker {node_id!r} in the cluster (brokers: {known})")

    def bootstrap(self) -> str:
        return ",".join(node.address for node in self.nodes())

    def state(self, node: Node) -> str:
        """``running``, ``frozen`` (SIGSTOP) or ``down``."""
        pid = node.pid()
        letter = self.base.process_state(pid, node.config) if pid else None
        if letter is None:
            return "down"
        return "frozen" if letter == "T" else "running"

    def describe(self) -> dict[str, Any]:
        return {
            "bootstrap": self.bootstrap(),
            "brokers": [
                {"id": n.id, "address": n.address, "pid": n.pid(), "state": self.state(n)}
                for n in self.nodes()
            ],
        }

    def answering(self) -> list[Node]:
        return [n for n in self.nodes() if self.base.answers(n.address, n.id)]

    # ------------------------------------------------------------------ configuration

    def properties(self, node: Node, voters: str, count: int) -> str:
        copies = str(min(3, count))
        isr = str(min(2, count))
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(node.id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{node.address},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{node.address}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(node.home / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "default.replication.factor": copies,
            "min.insync.replicas": "1",
            "offsets.topic.replication.factor": copies,
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": copies,
            "transaction.state.log.min.isr": isr,
            "transaction.state.log.num.partitions": "2",
            "share.coordinator.state.topic.replication.factor": copies,
            "share.coordinator.state.topic.min.isr": isr,
            "group.share.min.heartbeat.interval.ms": "500",
            "group.share.min.record.lock.duration.ms": "1000",
            "group.consumer.min.session.timeout.ms": "6000",
            "group.consumer.min.heartbeat.interval.ms": "500",
            "group.initial.rebalance.delay.ms": "0",
            "controller.socket.timeout.ms": "5000",
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def format_all(self, nodes: list[Node]) -> None:
        """Format every node's storage with one cluster id, the JVMs side by side."""
        cluster_id = self.base.cluster_id()
        running = []
        for node in nodes:
            command = self.base.java_command(
                "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                "-c", str(node.config), "--feature", "share.version=1",
            )  # fmt: skip
            running.append(
                subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            )
        for node, child in zip(nodes, running, strict=True):
            output, _ = child.communicate(timeout=180)
            if child.returncode != 0:
                raise self.base.ScriptError(
                    f"formatting broker {node.id} failed (exit {child.returncode}):\n"
                    + output.decode(errors="replace")[-3000:]
                )

    # ------------------------------------------------------------------ processes

    def launch(self, node: Node) -> subprocess.Popen[bytes]:
        child: subprocess.Popen[bytes] = self.base.launch(node.config, node.log, CLUSTER_HEAP)
        node.pid_file.write_text(f"{child.pid}\n")
        return child

    def timeout_s(self) -> float:
        return float(os.environ.get("LANEWAY_BROKER_START_TIMEOUT", "120"))

    def wait_all(self, nodes: list[Node], children: list[subprocess.Popen[bytes]]) -> None:
        """Wait until every node of ``nodes`` answers and lists itself and every other node
        that runs (not frozen, not down) as brokers: registered and unfenced with the
        controller quorum."""
        base = self.base
        deadline = time.monotonic() + self.timeout_s()
        starting = {n.id for n in nodes}
        wanted = {n.id for n in self.nodes() if n.id in starting or self.state(n) == "running"}
        while True:
            for node, child in zip(nodes, children, strict=True):
                if child.poll() is not None:
                    tail = base.log_tail(log_file=node.log)
                    raise base.ScriptError(f"broker {node.id} exited at start-up:\n{tail}")
            if all(self._lists(node, wanted) for node in nodes):
                return
            if time.monotonic() > deadline:
                raise base.ScriptError(
                    f"the cluster did not come up within {self.timeout_s():.0f}s; log tail of "
                    f"broker {nodes[0].id}:\n{base.log_tail(log_file=nodes[0].log)}"
                )
            time.sleep(0.2)

    def _lists(self, node: Node, wanted: set[int]) -> bool:
        try:
            found = self.base.probe_brokers("127.0.0.1", node.port)
        except (OSError, ValueError, struct.error):  # a half-started broker: garbage
            return False
        return {broker for broker, _, _ in found} >= wanted

    def signal(self, node: Node, sig: signal.Signals) -> int:
        pid = node.pid()
        if not pid or not self.base.alive(pid, node.config):
            raise self.base.ScriptError(f"broker {node.id} is not running")
        os.killpg(pid, sig)
        return pid

    # ------------------------------------------------------------------ commands

    def start(self, count: int) -> str:
        base = self.base
        if not 1 <= count <= MAX_BROKERS:
            raise base.ScriptError(f"--brokers must be between 1 and {MAX_BROKERS}, got {count}")
        with base.state_lock():
            nodes = self.nodes()
            if nodes and len(nodes) == count and len(self.answering()) == count:
                base.say(f"cluster of {count} brokers already running at {self.bootstrap()}")
                return self.bootstrap()
            self._stop_locked()
            base.ensure_jars()
            began = time.monotonic()
            ports = base.free_ports(2 * count)
            self.root.mkdir(parents=True)
            layout = [
                {"id": i + 1, "port": ports[2 * i], "controller_port": ports[2 * i + 1]}
                for i in range(count)
            ]
            self.layout.write_text(json.dumps({"nodes": layout}) + "\n")
            nodes = self.nodes()
            voters = ",".join(f"{n.id}@127.0.0.1:{n.controller_port}" for n in nodes)
            for node in nodes:
                node.home.mkdir(parents=True)
                node.config.write_text(self.properties(node, voters, count))
            self.format_all(nodes)
            formatted = time.monotonic() - began
            children = [self.launch(node) for node in nodes]
            try:
                self.wait_all(nodes, children)
            except base.ScriptError:
                self._stop_locked()
                raise
            took = time.monotonic() - began
            base.say(
                f"cluster of {count} brokers ready at {self.bootstrap()} in {took:.1f}s "
                f"(storage formatted in {formatted:.1f}s)"
            )
            return self.bootstrap()

    def stop(self) -> None:
        with self.base.state_lock():
            self._stop_locked()

    def _stop_locked(self) -> None:
        stopped = []
        for node in self.nodes():
            pid = node.pid()
            if pid and self.base.alive(pid, node.config):
                self.base.terminate(pid, node.config)
                stopped.append(str(node.id))
        if stopped:
            self.base.say(f"stopped cluster brokers {', '.join(stopped)}")
        elif self.root.exists():
            self.base.say("no cluster broker running")
        shutil.rmtree(self.root, ignore_errors=True)

    def kill(self, node_id: str) -> str:
        node = self.node(node_id)
        with self.base.state_lock():
            pid = self.signal(node, signal.SIGKILL)
            deadline = time.monotonic() + self.base.KILL_WAIT_S
            while self.base.alive(pid, node.config) and time.monotonic() < deadline:
                time.sleep(0.05)
        self.base.say(f"killed broker {node.id} (pid {pid}) with SIGKILL")
        return node.address

    def freeze(self, node_id: str) -> str:
        node = self.node(node_id)
        pid = self.signal(node, signal.SIGSTOP)
        self.base.say(f"froze broker {node.id} (pid {pid}) with SIGSTOP")
        return node.address

    def thaw(self, node_id: str) -> str:
        node = self.node(node_id)
        pid = self.signal(node, signal.SIGCONT)
        self.base.say(f"thawed broker {node.id} (pid {pid}) with SIGCONT")
        return node.address

    def restart(self, node_id: str) -> str:
        """Stop broker ``node_id`` if it runs (a frozen one too), start it again on its
        storage and ports, and wait until it answers with itself and the other running
        brokers listed."""
        base = self.base
        node = self.node(node_id)
        with base.state_lock():
            began = time.monotonic()
            pid = node.pid()
            if pid and base.alive(pid, node.config):
                base.terminate(pid, node.config)
            child = self.launch(node)
            self.wait_all([node], [child])
        took = time.monotonic() - began
        base.say(f"broker {node.id} restarted as pid {child.pid} at {node.address} in {took:.1f}s")
        return node.address

    def controller(self) -> int:
        """The node id of the active controller (the quorum's leader), as Kafka's
        kafka-metadata-quorum tool reports it from the running nodes' controller listeners."""
        voters = ",".join(
            f"127.0.0.1:{n.controller_port}" for n in self.nodes() if self.state(n) == "running"
        )
        command = self.base.java_command(
            "org.apache.kafka.tools.MetadataQuorumCommand",
            "--bootstrap-controller", voters, "describe", "--status",
        )  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        found = re.search(r"^LeaderId:\s+(\d+)$", done.stdout, re.MULTILINE)
        if done.returncode != 0 or found is None:
            raise self.base.ScriptError(
                f"kafka-metadata-quorum named no leader (exit {done.returncode}):\n"
                + (done.stdout + done.stderr)[-3000:]
            )
        return int(found.group(1))

    def status(self) -> str | None:
        if not self.nodes() or not self.answering():
            return None
        return self.bootstrap()


def main(base: ModuleType, command: str, arguments: list[str]) -> int:
    """Run a cluster ``command`` (start, stop, status, env, brokers, controller, kill, freeze,
    thaw, restart) with its ``arguments``; return the exit code."""
    cluster = Cluster(base)
    if command == "start":
        print(cluster.start(int(arguments[0])), flush=True)
    elif command == "stop":
        cluster.stop()
    elif command in ("status", "env"):
        address = cluster.status()
        if address is None:
            base.say("no cluster running")
            return 1
        print(address if command == "status" else f"export LANEWAY_CLUSTER={address}")
    elif command == "brokers":
        print(json.dumps(cluster.describe()), flush=True)
    elif command == "controller":
        print(cluster.controller(), flush=True)
    elif command in ("kill", "freeze", "thaw", "restart"):
        print(getattr(cluster, command)(arguments[0]), flush=True)
    else:
        return 2
    return 0
