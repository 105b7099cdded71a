"""The cluster under test: three `schedd serve` processes (tests/servers.py) with short dispatch
timings, and the process-level faults the nemesis uses. Every process started here is stopped
by `stop_all` (kill by PID), which the runner calls in a `finally`."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import schedd
from tests.chaos.client import call, read_json
from tests.faketime import ClockShift
from tests.servers import ADMIN_TOKEN, RAFT_SECRET, NodeProcess, make_nodes

PARTITIONS = 256
LEASE_TTL_S = 2.0
MISFIRE_THRESHOLD_S = 10.0
SECTIONS = (
    f'[dispatch]\nlease_ttl = "{LEASE_TTL_S:g}s"\nmisfire_threshold = "{MISFIRE_THRESHOLD_S:g}s"\n'
    '\n[delivery]\nallow_cidrs = ["127.0.0.0/8", "10.0.0.0/8"]\n'
)
# Compact often, so a node that lost its disk ("wipe") or lagged gets a snapshot, not the log.
RAFT_EXTRA = 'compaction_min_entries = 1000\ncompaction_min_time = "20s"\n'
# What a node keeps on disk of the cluster's state (its config and secrets stay).
STATE_FILES = ("state.db*", "raft.journal*", "raft.snapshot*")


def freeze_code(base: Path) -> tuple[Path, str]:
    """Copy the `schedd` package under `base` (nodes run it from there, so an edit of the working
    tree mid-round cannot put two versions in one cluster); (folder, sha256 of the copy)."""
    source = Path(schedd.__file__).resolve().parent
    target = base / "code"
    shutil.copytree(source, target / "schedd", ignore=shutil.ignore_patterns("__pycache__"))
    digest = hashlib.sha256()
    for path in sorted((target / "schedd").rglob("*.py")):
        digest.update(path.relative_to(target).as_posix().encode() + b"\0" + path.read_bytes())
    return target, digest.hexdigest()


def freeze_release(base: Path, rev: str) -> Path:
    """The `schedd` package as of git revision `rev` (`git archive`), under `base`: nodes started
    from that folder run that release, the old code of a rolling upgrade (`--upgrade-from`)."""
    repo = Path(schedd.__file__).resolve().parents[1]
    target = base / "release"
    target.mkdir()
    archive = subprocess.run(
        ["git", "archive", rev, "schedd"], cwd=repo, capture_output=True, check=True, timeout=60
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True, timeout=60)
    return target


@dataclass
class ChaosNode(NodeProcess):
    """A node run from the frozen code, optionally behind a command prefix (`ip netns exec`)."""

    code_dir: Path | None = None
    prefix: tuple[str, ...] = ()

    def start(self) -> None:
        env = {**os.environ, "SCHEDD_ADMIN_TOKEN": ADMIN_TOKEN, "SCHEDD_RAFT_SECRET": RAFT_SECRET}
        command = [sys.executable, "-m", "schedd", "serve", "--config", str(self.config_path)]
        with self.log_path.open("ab") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [*self.prefix, *command],
                cwd=self.code_dir,  # `python -m` puts the working folder first on sys.path
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env | self.extra_env,
            )


class ChaosCluster:
    """Three nodes on loopback; `nodes` may also be network-namespaced ones (netns.py)."""

    def __init__(self, nodes: list[NodeProcess]) -> None:
        self.nodes = nodes
        self.paused: set[str] = set()
        self.mode = "loopback"
        self.clocks: dict[str, ClockShift] = {}  # node_id -> its wall-clock offset (faketime)
        for node in nodes:
            shift = ClockShift(node.config_path.with_suffix(".faketime"))
            node.extra_env = node.extra_env | shift.env()
            self.clocks[node.node_id] = shift

    @classmethod
    def on_loopback(cls, base: Path, code_dir: Path) -> ChaosCluster:
        made = make_nodes(base, 3, raft_extra=RAFT_EXTRA, extra_sections=SECTIONS)
        nodes: list[NodeProcess] = [
            ChaosNode(**{f.name: getattr(n, f.name) for f in fields(n)}, code_dir=code_dir)
            for n in made
        ]
        return cls(nodes)

    def node(self, node_id: str) -> NodeProcess:
        return next(n for n in self.nodes if n.node_id == node_id)

    def urls(self) -> dict[str, str]:
        return {n.node_id: n.url for n in self.nodes}

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout_s: float = 60.0) -> None:
        for node in self.nodes:
            node.start()
        if self.wait_healthy(timeout_s) is None:
            raise RuntimeError(f"cluster not ready in {timeout_s}s\n{self.log_tails()}")

    def stop_all(self) -> None:
        """Resume anything paused, then SIGTERM -> wait -> SIGKILL each node by its PID."""
        for node in self.nodes:
            with contextlib.suppress(Exception):
                if node.node_id in self.paused and node.is_running():
                    node.resume()
        self.paused.clear()
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.stop(timeout_s=10.0)

    def kill(self, node: NodeProcess) -> None:
        node.kill()
        self.paused.discard(node.node_id)

    def wipe(self, node: NodeProcess) -> None:
        """kill -9, then delete the node's state as if its disk were replaced: it must get it
        all back from the others (a snapshot, once their logs are compacted)."""
        self.kill(node)
        for pattern in STATE_FILES:
            for path in node.data_dir.glob(pattern):
                path.unlink()

    def upgrade(self, node: NodeProcess, code_dir: Path) -> dict[str, Any]:
        """One step of a rolling upgrade: stop the node as its service manager would (SIGTERM,
        waited for), then start it from `code_dir` on the same data. Facts: whether it was
        running, and its exit code (0 for a clean stop)."""
        assert isinstance(node, ChaosNode)
        was_running = node.is_running()
        exit_code = node.stop(timeout_s=30.0) if was_running else None
        node.code_dir = code_dir
        node.start()
        return {"was_running": was_running, "exit_code": exit_code}

    def restart(self, node: NodeProcess) -> None:
        if not node.is_running():
            node.start()

    def pause(self, node: NodeProcess) -> None:
        node.pause()
        self.paused.add(node.node_id)

    def resume(self, node: NodeProcess) -> None:
        if node.is_running():
            node.resume()
        self.paused.discard(node.node_id)

    def heal(self) -> None:
        """Every node running, resumed and on the real time (network faults are healed by their
        own owner)."""
        for shift in self.clocks.values():
            if shift.offset_s:
                shift.shift(0)
        for node in self.nodes:
            if node.node_id in self.paused:
                self.resume(node)
            self.restart(node)

    def log_tails(self, lines: int = 30) -> str:
        return "\n".join(f"--- {n.node_id}\n{n.log_tail(lines)}" for n in self.nodes)

    # ------------------------------------------------------------------ views

    def reachable(self) -> list[NodeProcess]:
        return [n for n in self.nodes if n.is_running() and n.node_id not in self.paused]

    def states(self, nodes: list[NodeProcess] | None = None) -> dict[str, dict[str, Any] | None]:
        """node_id -> /v1/admin/state (None when it does not answer in 3 s), read in parallel."""
        chosen = self.reachable() if nodes is None else nodes
        if not chosen:
            return {}
        with ThreadPoolExecutor(len(chosen)) as pool:
            answers = pool.map(
                lambda n: read_json(n.url, "/v1/admin/state", token=ADMIN_TOKEN, timeout_s=3),
                chosen,
            )
            return {n.node_id: a for n, a in zip(chosen, answers, strict=True)}

    def leader_id(self, among: list[NodeProcess] | None = None) -> str | None:
        """The leader most of the answering nodes name, or None."""
        named = Counter(
            s["leader"] for s in self.states(among).values() if s and s.get("leader") is not None
        )
        return named.most_common(1)[0][0] if named else None

    def is_healthy(self) -> bool:
        """Every node runs, answers /readyz and names the same leader."""
        if len(self.reachable()) != len(self.nodes):
            return False
        for node in self.nodes:
            if call(node.url, "GET", "/readyz", token=ADMIN_TOKEN, timeout_s=2).status != 200:
                return False
        leaders = {s["leader"] if s else None for s in self.states().values()}
        return len(leaders) == 1 and None not in leaders

    def wait_healthy(self, timeout_s: float) -> float | None:
        """Seconds until healthy, or None after `timeout_s`."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            if self.is_healthy():
                return time.monotonic() - start
            time.sleep(0.2)
        return None

    def held_partitions(self, viewer: NodeProcess) -> dict[str, set[int]] | None:
        """node_id -> partitions with an unexpired lease, as `viewer` sees them."""
        body = read_json(viewer.url, "/v1/cluster", token=ADMIN_TOKEN, timeout_s=3)
        if not isinstance(body, dict):
            return None
        return {n["node_id"]: set(n["partitions"]) for n in body["nodes"]}


@contextlib.contextmanager
def cpu_load(workers: int = 2, limit_s: float = 60.0) -> Iterator[list[int]]:
    """Busy-loop processes (one per core by default); killed by PID on exit, and each ends by
    itself after `limit_s` should this process die first."""
    loop = f"import time\nend = time.monotonic() + {limit_s}\nwhile time.monotonic() < end: pass"
    procs = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(workers)]
    try:
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(timeout=10)
