"""The nemesis: a fault schedule drawn from the seed (the same seed, the same schedule), run on
its own thread against the cluster, measuring failover and partition-move times as it goes.
Whatever happens, `run` ends with every node running, resumed and reconnected."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from tests.chaos.client import call, now_ms
from tests.chaos.cluster import LEASE_TTL_S, PARTITIONS, ChaosCluster, cpu_load
from tests.chaos.history import FaultEvent, History
from tests.servers import ADMIN_TOKEN, NodeProcess

PROCESS_KINDS = ("kill", "kill_all", "pause", "cpu_restart", "wipe", "wipe_storm")
NETWORK_KINDS = ("partition",)
CLOCK_KINDS = ("clock_jump",)
JUMP_S = (20, 60)  # a wall-clock jump's size, either way
FIRST_FAULT_S = 6.0
QUIET_TAIL_S = 15.0  # no fault starts this close to the end of the workload
WATCH_LIMIT_S = 20.0
ROLES = {
    "kill": ("leader", "follower", "any"),
    "kill_all": ("all",),
    "pause": ("leader", "follower"),
    "cpu_restart": ("leader", "follower", "any"),
    "wipe": ("leader", "follower"),
    "wipe_storm": ("follower",),  # and the leader cut off (paused on loopback) meanwhile
    "partition": ("leader", "follower"),
    "clock_jump": ("leader", "follower"),
}
COVERAGE = (  # every round starts with these, shuffled
    ("pause", "leader"),
    ("pause", "follower"),
    ("kill", "leader"),
    ("kill_all", "all"),
    ("cpu_restart", "any"),
    ("wipe", "follower"),
    ("wipe_storm", "follower"),
    ("partition", "leader"),
    ("partition", "follower"),
    ("clock_jump", "leader"),
    ("clock_jump", "follower"),
)  # a fault is held at most this much longer, to see its failover
HEALTHY_TIMEOUT_S = 45.0


@dataclass(frozen=True, slots=True)
class PlannedFault:
    at_s: float  # earliest start, seconds after the workload began
    kind: str
    role: str  # leader | follower | any | all
    hold_s: float
    jump_s: int = 0  # clock_jump: seconds added to the victim's wall clock


class Partitioner(Protocol):
    """Network faults (netns.py): cut a node's Raft link, and restore it."""

    def isolate(self, node_id: str) -> None: ...
    def reconnect(self, node_id: str) -> None: ...
    def reconnect_all(self) -> None: ...


def plan_faults(seed: int, workload_s: float, kinds: tuple[str, ...]) -> list[PlannedFault]:
    """Faults from `seed` alone: first each (kind, role) the suite promises to cover, in a
    seeded order, then random ones, until QUIET_TAIL_S before the end of the workload."""
    rng = random.Random(f"faults-{seed}")
    cover = [(kind, role) for kind, role in COVERAGE if kind in kinds]
    order = rng.sample(cover, len(cover))
    plan: list[PlannedFault] = []
    at = FIRST_FAULT_S
    while at < workload_s - QUIET_TAIL_S:
        if order:
            kind, role = order.pop(0)
        else:
            kind = rng.choice(kinds)
            role = rng.choice(ROLES[kind])
        hold = _hold_s(rng, kind)
        jump = rng.choice((-1, 1)) * rng.randint(*JUMP_S) if kind == "clock_jump" else 0
        plan.append(PlannedFault(round(at, 1), kind, role, round(hold, 1), jump))
        at += hold + rng.uniform(4.0, 7.0)  # recovery, then a quiet gap
    return plan


def plan_upgrades(workload_s: float, node_ids: list[str]) -> list[PlannedFault]:
    """A rolling upgrade (`--upgrade-from`): each node in turn restarted on today's code, the
    first a quarter into the workload, the next ones 15% of it apart (the faults go on around
    them). Role is the node's id."""
    return [
        PlannedFault(round(workload_s * (0.25 + 0.15 * i), 1), "upgrade", node_id, 0.0)
        for i, node_id in enumerate(node_ids)
    ]


def _hold_s(rng: random.Random, kind: str) -> float:
    if kind in ("kill", "wipe"):
        return rng.uniform(2.0, 5.0)
    if kind == "kill_all":
        return rng.uniform(1.0, 3.0)
    if kind == "pause":  # past the lease ttl, so its partitions move meanwhile
        return LEASE_TTL_S + rng.uniform(1.0, 4.0)
    if kind == "cpu_restart":
        return rng.uniform(4.0, 7.0)
    if kind == "clock_jump":  # libfaketime takes up to 2 s to see a change
        return rng.uniform(6.0, 10.0)
    return rng.uniform(7.0, 11.0)  # partitions: long enough for probes to be answered


class Nemesis(threading.Thread):
    """Runs the plan; `stop` ends it after the current fault (healed)."""

    def __init__(
        self,
        cluster: ChaosCluster,
        history: History,
        plan: list[PlannedFault],
        seed: int,
        partitioner: Partitioner | None = None,
        probe: Callable[[str], None] | None = None,
        upgrade_to: Path | None = None,
    ) -> None:
        super().__init__(name="nemesis", daemon=True)
        self.cluster, self.history, self.plan = cluster, history, plan
        self.partitioner = partitioner
        self.upgrade_to = upgrade_to  # today's code: what an "upgrade" restarts a node on
        self.probe = probe  # during a partition: writes sent to the cut-off node
        self.rng = random.Random(f"targets-{seed}")
        self.stop = threading.Event()
        self.started_ms = now_ms()
        self.unhealthy: list[dict[str, Any]] = []  # the cluster did not recover in time
        self.errors: list[str] = []

    def run(self) -> None:
        try:
            for fault in self.plan:
                wait_s = self.started_ms / 1000 + fault.at_s - time.time()
                if self.stop.wait(max(0.0, wait_s)):
                    break
                self._await_health(f"before {fault.kind}")
                self._inject(fault)
        except Exception as exc:  # recorded, and the cluster is still healed below
            self.errors.append(repr(exc))
        finally:
            self.heal()
            self._await_health("after the last fault")

    def heal(self) -> None:
        if self.partitioner is not None:
            with contextlib.suppress(Exception):
                self.partitioner.reconnect_all()
        self.cluster.heal()

    def _await_health(self, when: str) -> None:
        if self.cluster.wait_healthy(HEALTHY_TIMEOUT_S) is None:
            self.unhealthy.append({"when": when, "at_ms": now_ms()})
            self.cluster.heal()

    # ------------------------------------------------------------------ faults

    def _pick(self, role: str) -> tuple[NodeProcess, str]:
        """A node for a role, and the role it really had (no leader known: any node)."""
        leader = self.cluster.leader_id()
        nodes = self.cluster.nodes
        if role == "leader" and leader is not None:
            return self.cluster.node(leader), "leader"
        others = [n for n in nodes if n.node_id != leader]
        if role == "follower" and leader is not None:
            return self.rng.choice(others), "follower"
        node = self.rng.choice(nodes)
        return node, ("leader" if node.node_id == leader else "follower")

    def _inject(self, fault: PlannedFault) -> None:
        if fault.kind == "kill_all":
            self._kill_all(fault)
            return
        if fault.kind == "upgrade":
            self._upgrade(fault)
            return
        node, role = self._pick(fault.role)
        event = self.history.fault(FaultEvent(fault.kind, node.node_id, role, now_ms()))
        event.facts["planned"] = asdict(fault)
        try:
            if fault.kind == "kill":
                self.cluster.kill(node)
                self._hold(event, node, role, fault.hold_s)
            elif fault.kind == "wipe":
                self.cluster.wipe(node)
                self._hold(event, node, role, fault.hold_s)
            elif fault.kind == "wipe_storm":
                self._wipe_storm(event, node, fault.hold_s)
            elif fault.kind == "pause":
                self.cluster.pause(node)
                self._hold(event, node, role, fault.hold_s)
            elif fault.kind == "cpu_restart":
                self._cpu_restart(event, node, fault.hold_s)
            elif fault.kind == "partition" and self.partitioner is not None:
                self.partitioner.isolate(node.node_id)
                self._hold(event, node, role, fault.hold_s, probe=self.probe)
            elif fault.kind == "clock_jump":
                self.cluster.clocks[node.node_id].shift(fault.jump_s)
                self._hold(event, node, role, fault.hold_s)
        finally:
            if fault.kind == "partition" and self.partitioner is not None:
                self.partitioner.reconnect(node.node_id)
            self.cluster.heal()
            event.end_ms = now_ms()
        back = self.cluster.wait_healthy(HEALTHY_TIMEOUT_S)
        event.facts["healthy_after_heal_s"] = None if back is None else round(back, 2)

    def _hold(
        self,
        event: FaultEvent,
        victim: NodeProcess,
        role: str,
        hold_s: float,
        probe: Callable[[str], None] | None = None,
    ) -> None:
        """Keep the fault for `hold_s`, longer (up to WATCH_LIMIT_S) until the survivors show a
        new leader (when the victim led) and every partition held by a live node; `probe` is
        called with the victim's id every half second meanwhile."""
        survivors = [n for n in self.cluster.nodes if n is not victim]
        start = time.monotonic()
        facts = event.facts
        want_leader = role == "leader"
        next_probe = start + 0.5
        while True:
            elapsed = time.monotonic() - start
            if probe is not None and time.monotonic() >= next_probe:
                probe(victim.node_id)
                next_probe += 0.5
            if want_leader and "failover_s" not in facts:
                leader = self.cluster.leader_id(survivors)
                if leader is not None and leader != victim.node_id:
                    facts["failover_s"] = round(elapsed, 2)
            if "partitions_moved_s" not in facts and _taken_over(
                self.cluster, survivors, victim.node_id
            ):
                facts["partitions_moved_s"] = round(time.monotonic() - start, 2)
            seen = "partitions_moved_s" in facts and (not want_leader or "failover_s" in facts)
            if elapsed >= hold_s and (seen or elapsed >= hold_s + WATCH_LIMIT_S):
                return
            time.sleep(0.1)

    def _wipe_storm(self, event: FaultEvent, node: NodeProcess, hold_s: float) -> None:
        """Issue 27: cut the leader off (its Raft link; SIGSTOP without namespaces), and while
        the other two hold elections, kill -9 the follower `node`, delete its state and restart
        it at once: it has lost the vote it may have given in the current term. Held `hold_s`,
        then the leader comes back. The checker's `two_leaders_in_term` is the rule it tests:
        with only one other member to hear from, the wiped node must not vote (no leader until
        the heal is the expected price)."""
        leader_id = self.cluster.leader_id()
        leader = None if leader_id in (None, node.node_id) else self.cluster.node(leader_id)
        event.facts["leader"] = leader_id
        is_cut = leader is not None and self.partitioner is not None
        try:
            if leader is not None and self.partitioner is not None:
                self.partitioner.isolate(leader.node_id)
            elif leader is not None:
                self.cluster.pause(leader)
            storm_s = self.rng.uniform(0.5, 3.0)  # the survivors' first elections under way
            event.facts["wipe_after_s"] = round(storm_s, 2)
            time.sleep(storm_s)
            self.cluster.wipe(node)
            time.sleep(0.2)
            self.cluster.restart(node)
            time.sleep(hold_s)
        finally:
            if is_cut and leader is not None and self.partitioner is not None:
                self.partitioner.reconnect(leader.node_id)

    def _upgrade(self, fault: PlannedFault) -> None:
        """Restart node `fault.role` on today's code (a clean stop first). The runner counts an
        upgrade that found its node down, or stopping with an error, as a violation: the old
        code must never have been sent a command it cannot apply."""
        assert self.upgrade_to is not None, "an upgrade planned without today's code"
        node = self.cluster.node(fault.role)
        role = "leader" if self.cluster.leader_id() == node.node_id else "follower"
        event = self.history.fault(FaultEvent("upgrade", node.node_id, role, now_ms()))
        event.facts["planned"] = asdict(fault)
        try:
            event.facts |= self.cluster.upgrade(node, self.upgrade_to)
            ready = _wait(lambda: _is_ready(node), HEALTHY_TIMEOUT_S)
            event.facts["ready_s"] = None if ready is None else round(ready, 2)
        finally:
            self.cluster.heal()
            event.end_ms = now_ms()
        back = self.cluster.wait_healthy(HEALTHY_TIMEOUT_S)
        event.facts["healthy_after_heal_s"] = None if back is None else round(back, 2)

    def _kill_all(self, fault: PlannedFault) -> None:
        event = self.history.fault(FaultEvent("kill_all", "all", "all", now_ms()))
        event.facts["planned"] = asdict(fault)
        try:
            for node in self.cluster.nodes:
                self.cluster.kill(node)
            time.sleep(fault.hold_s)
        finally:
            self.cluster.heal()
            event.end_ms = now_ms()
        back = self.cluster.wait_healthy(HEALTHY_TIMEOUT_S)
        event.facts["recovery_s"] = None if back is None else round(back, 2)
        event.facts["healthy_after_heal_s"] = event.facts["recovery_s"]

    def _cpu_restart(self, event: FaultEvent, node: NodeProcess, hold_s: float) -> None:
        """Busy loops on both cores; kill -9 the node a moment in and restart it under load."""
        with cpu_load() as pids:
            event.facts["load_pids"] = pids
            time.sleep(0.5)
            self.cluster.kill(node)
            time.sleep(min(2.0, hold_s / 3))
            self.cluster.restart(node)
            restarted = time.monotonic()
            ready = _wait(lambda: _is_ready(node), hold_s + WATCH_LIMIT_S)
            event.facts["ready_under_load_s"] = None if ready is None else round(ready, 2)
            time.sleep(max(0.0, hold_s - (time.monotonic() - restarted)))


def _is_ready(node: NodeProcess) -> bool:
    return call(node.url, "GET", "/readyz", token=ADMIN_TOKEN, timeout_s=2).status == 200


def _wait(condition: Callable[[], bool], timeout_s: float) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if condition():
            return time.monotonic() - start
        time.sleep(0.1)
    return None


def _taken_over(cluster: ChaosCluster, survivors: list[NodeProcess], victim_id: str) -> bool:
    """A survivor sees every partition leased, none of them to the victim."""
    for viewer in survivors:
        if not viewer.is_running() or viewer.node_id in cluster.paused:
            continue
        held = cluster.held_partitions(viewer)
        if held is None:
            continue
        owned = set().union(*held.values()) if held else set()
        return not held.get(victim_id) and owned == set(range(PARTITIONS))
    return False
