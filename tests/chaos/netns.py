"""Optional real partitions: one network namespace per node, each with two veth pairs to the
host, one for Raft traffic and one for the API. Cutting a node's Raft link (host end down)
isolates it from its peers while clients still reach its API, so a minority that answers can
be caught acknowledging writes. The namespaces have no default route: nothing leaves the
machine. Needs root and `ip`; no iptables. Everything made here is removed by `destroy`.

Addresses (a = 100 + pid % 100): node i's Raft at 10.a.i.2 (host end 10.a.i.1), its API at
10.a.(64+i).2 (host end 10.a.(64+i).1). Raft packets between namespaces are routed by the host
(ip_forward, restored afterwards); the HTTP receiver listens on 10.a.65.1, which every
namespace reaches over its own API link.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.chaos.cluster import RAFT_EXTRA, SECTIONS, ChaosCluster, ChaosNode
from tests.receiver import Receiver

API_PORT = 8701
RAFT_PORT = 9701
FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
# The host's own ip_forward, saved by the first lab of any that run at once and restored by the
# last (a lab that read it while another ran would restore that one's "1").
FORWARD_SAVED = Path(tempfile.gettempdir()) / "schedd-chaos-ip-forward"
LAB_PREFIX = "sch"  # every namespace of a lab: sch<tag>n<i>


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=10)


def netns_available() -> bool:
    """Root, `ip`, and a namespace with a veth pair can really be made (and is removed)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    name = f"schk{os.getpid() % 100000}"
    try:
        _ip("netns", "add", name)
        _ip("link", "add", f"{name}h", "type", "veth", "peer", "name", f"{name}n")
        _ip("link", "set", f"{name}n", "netns", name)
        return True
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        _ip("link", "del", f"{name}h", check=False)
        _ip("netns", "del", name, check=False)


@dataclass
class NetnsNode(ChaosNode):
    """A node whose process runs inside its own namespace (same PID: `ip netns exec` execs)."""

    api_host: str = ""
    raft_host: str = ""

    @property
    def url(self) -> str:
        return f"http://{self.api_host}:{self.api_port}"

    @property
    def raft(self) -> str:
        return f"{self.raft_host}:{self.raft_port}"


@dataclass
class NetnsLab:
    """Three namespaces wired to the host; `isolate`/`reconnect` cut and restore Raft links."""

    base: Path
    octet: int
    tag: str
    namespaces: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, base: Path) -> NetnsLab:
        pid = os.getpid()
        lab = cls(base, 100 + pid % 100, f"{pid % 10000}")
        if not _other_labs():
            FORWARD_SAVED.write_text(FORWARD.read_text())
        try:
            for i in (1, 2, 3):
                lab._wire(i)
            FORWARD.write_text("1\n")
        except BaseException:
            lab.destroy()
            raise
        return lab

    def _names(self, i: int) -> tuple[str, str, str]:
        """(namespace, host end of the Raft link, host end of the API link)."""
        return f"sch{self.tag}n{i}", f"scr{self.tag}n{i}", f"sca{self.tag}n{i}"

    def _wire(self, i: int) -> None:
        ns, raft_if, api_if = self._names(i)
        a = self.octet
        _ip("netns", "add", ns)
        self.namespaces.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        for host_if, subnet, routes in ((raft_if, i, "0.0/18"), (api_if, 64 + i, "64.0/18")):
            inner = host_if[:-2] + "i" + str(i)
            _ip("link", "add", host_if, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", ns)
            _ip("addr", "add", f"10.{a}.{subnet}.1/24", "dev", host_if)
            _ip("link", "set", host_if, "up")
            _ip("-n", ns, "addr", "add", f"10.{a}.{subnet}.2/24", "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            _ip("-n", ns, "route", "add", f"10.{a}.{routes}", "via", f"10.{a}.{subnet}.1")

    def nodes(self, code_dir: Path) -> list[NetnsNode]:
        a = self.octet
        nodes = [
            NetnsNode(
                node_id=f"n{i}",
                config_path=self.base / f"n{i}.toml",
                data_dir=self.base / f"n{i}",
                api_port=API_PORT,
                raft_port=RAFT_PORT,
                log_path=self.base / f"n{i}.log",
                code_dir=code_dir,
                prefix=("ip", "netns", "exec", self._names(i)[0]),
                api_host=f"10.{a}.{64 + i}.2",
                raft_host=f"10.{a}.{i}.2",
            )
            for i in (1, 2, 3)
        ]
        for node in nodes:
            peers = ", ".join(json.dumps(n.raft) for n in nodes if n is not node)
            node.config_path.write_text(
                f'[node]\nid = "{node.node_id}"\ndata_dir = "{node.data_dir}"\n'
                f'log_level = "info"\n\n[api]\nlisten = "{node.api_host}:{node.api_port}"\n\n'
                f'[raft]\nlisten = "{node.raft}"\npeers = [{peers}]\n'
                'election_timeout_min = "1s"\nelection_timeout_max = "2.5s"\n'
                f"{RAFT_EXTRA}\n{SECTIONS}"
            )
        return nodes

    def cluster(self, code_dir: Path) -> ChaosCluster:
        cluster = ChaosCluster(list(self.nodes(code_dir)))
        cluster.mode = "netns"
        return cluster

    def receiver(self) -> Receiver:
        return Receiver(f"10.{self.octet}.65.1")

    def isolate(self, node_id: str) -> None:
        _ip("link", "set", self._names(int(node_id[1:]))[1], "down")

    def reconnect(self, node_id: str) -> None:
        _ip("link", "set", self._names(int(node_id[1:]))[1], "up")

    def reconnect_all(self) -> None:
        for i in (1, 2, 3):
            self.reconnect(f"n{i}")

    def destroy(self) -> None:
        """Remove the namespaces (their veth pairs go with them); the last lab to end restores
        the host's ip_forward (two campaigns at once: the first to end had turned forwarding off
        under the second, whose cluster lost every Raft link)."""
        for ns in self.namespaces:
            _ip("netns", "del", ns, check=False)
        self.namespaces.clear()
        if _other_labs():
            return
        with contextlib.suppress(OSError):
            FORWARD.write_text(FORWARD_SAVED.read_text())
            FORWARD_SAVED.unlink()


def _other_labs() -> bool:
    """Whether namespaces of a lab (this process's or another's) exist now."""
    listed = _ip("netns", "list", check=False).stdout.split()
    return any(name.startswith(LAB_PREFIX) and "n" in name[len(LAB_PREFIX) :] for name in listed)
