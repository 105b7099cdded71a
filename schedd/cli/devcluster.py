"""`schedd dev`: a local cluster in one command, for trying schedd out.

Starts `schedd serve` children with generated configs and secrets, creates a demo tenant,
prints what to export (every node URL and pid, the demo tenant's token and
signing secret, the PATH to schedctl), and stops every child on Ctrl-C or SIGTERM.

A node that dies is reported and started again after `--restart-after` seconds, so a user can
kill the leader and watch the others carry on; a node that keeps dying soon after each restart
(CRASH_LOOP_LIMIT times in a row) stops the whole dev cluster instead.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn

import click

from schedd.errors import ClusterUnavailable
from schedd.sealing import new_key_line

START_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
API_BASE_PORT = 8701
RAFT_BASE_PORT = 9701
RESTART_AFTER_S = 10.0
CRASH_WINDOW_S = 15.0  # a death this soon after a restart counts towards a crash loop
CRASH_LOOP_LIMIT = 3  # this many such deaths in a row stop the dev cluster
POLL_S = 0.5


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _secret(path: Path, prefix: str = "") -> str:
    """Read a generated secret, creating it (0600) the first time."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(prefix + secrets.token_urlsafe(32) + "\n")
    return path.read_text().strip()


def _payload_key(path: Path) -> None:
    """The cluster's payload key file (one key, every node the same), created (0600) once."""
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(new_key_line("dev-1") + "\n")
            out.flush()
            os.fsync(out.fileno())  # payloads sealed with it are unreadable without it


def write_configs(data_dir: Path, nodes: int, api_port: int, raft_port: int) -> list[Path]:
    """One TOML file per node under data_dir (kept across runs, so data survives). Payloads
    and connection URLs are sealed at rest with a generated key (payload.keys)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    _secret(data_dir / "cluster.secret")
    _secret(data_dir / "admin.token", "adm_")
    _payload_key(data_dir / "payload.keys")
    rafts = [f"127.0.0.1:{raft_port + i}" for i in range(nodes)]
    paths = []
    for i in range(nodes):
        node_id = f"n{i + 1}"
        peers = ", ".join(json.dumps(r) for r in rafts if r != rafts[i])
        text = (
            f'[node]\nid = "{node_id}"\ndata_dir = "{node_id}"\n\n'
            f'[api]\nlisten = "127.0.0.1:{api_port + i}"\n\n'
            f'[raft]\nlisten = "{rafts[i]}"\npeers = [{peers}]\nsecret_file = "cluster.secret"\n\n'
            '[auth]\nadmin_token_file = "admin.token"\n\n'
            '[encryption]\npayload_keys_file = "payload.keys"\n\n'
            '[delivery]\nallow_cidrs = ["127.0.0.0/8"]\n'
        )
        path = data_dir / f"{node_id}.toml"
        path.write_text(text)
        paths.append(path)
    return paths


def _call(url: str, token: str, method: str = "GET", body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:  # loopback only
        return json.loads(response.read() or b"null")


def _wait_ready(urls: list[str], children: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    pending = set(urls)
    while pending:
        if time.monotonic() > deadline:
            raise ClusterUnavailable(
                f"nodes not ready after {START_TIMEOUT_S:.0f}s: {sorted(pending)}"
            )
        for child in children:
            if child.poll() is not None:
                raise ClusterUnavailable(f"a node exited with code {child.returncode}; see its log")
        for url in list(pending):
            try:
                urllib.request.urlopen(f"{url}/readyz", timeout=1).close()
                pending.discard(url)
            except (urllib.error.URLError, OSError):
                pass
        time.sleep(0.2)


@dataclass(frozen=True)
class Demo:
    """The demo tenant's credentials, kept in the data directory (0600) across runs."""

    token: str
    signing_secret: str


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (0600), whole: a temporary file, then renamed."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def _admin_call(url: str, admin_token: str, method: str, body: Any = None) -> Any:
    """An admin request, repeated while the cluster answers 503 (no leader yet)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            return _call(url, admin_token, method, body)
        except urllib.error.HTTPError as exc:
            if exc.code != 503 or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _new_demo_credentials(url: str, admin_token: str, has_tenant: bool) -> dict[str, Any]:
    """Create the demo tenant; or, when it exists, rotate it: its secret is shown only once."""
    if not has_tenant:
        return dict(_admin_call(f"{url}/v1/tenants", admin_token, "POST", {"name": "demo"}))
    page = _admin_call(f"{url}/v1/tenants?limit=1000", admin_token, "GET")
    tenant_id = next(t["tenant_id"] for t in page["tenants"] if t["name"] == "demo")
    return dict(_admin_call(f"{url}/v1/tenants/{tenant_id}/rotate", admin_token, "POST", {}))


def demo_tenant(data_dir: Path, url: str, admin_token: str) -> Demo:
    """The demo tenant: created once; its token and signing secret kept in data_dir."""
    token_path = data_dir / "demo.token"
    secret_path = data_dir / "demo.signing_secret"
    if token_path.exists() and secret_path.exists():
        return Demo(token_path.read_text().strip(), secret_path.read_text().strip())
    # A demo.token alone was written by an older `schedd dev`, which did not keep the secret.
    created = _new_demo_credentials(url, admin_token, has_tenant=token_path.exists())
    _write_private(secret_path, created["signing_secret"])
    _write_private(token_path, created["token"])  # last: its presence means both are there
    return Demo(str(created["token"]), str(created["signing_secret"]))


def schedctl_dir() -> Path | None:
    """The directory holding the `schedctl` installed with this schedd, if any."""
    beside = Path(sys.executable).absolute().parent
    if (beside / "schedctl").exists():
        return beside
    found = shutil.which("schedctl")
    return Path(found).absolute().parent if found else None


def _double_quoted(text: str) -> str:
    """Text for the inside of a shell double-quoted string."""
    return "".join("\\" + c if c in '\\"$`' else c for c in text)


def banner(
    urls: list[str], data_dir: Path, demo: Demo, bin_dir: Path | None, pids: Sequence[int] = ()
) -> list[str]:
    """What `schedd dev` prints once the cluster is ready: where things are, what to export."""
    lines = [
        f"node n{i + 1}: {url}" + (f"  (pid {pids[i]})" if i < len(pids) else "")
        for i, url in enumerate(urls)
    ]
    lines += [
        f"admin token: {data_dir / 'admin.token'}",
        f"demo tenant token: {demo.token}  ({data_dir / 'demo.token'})",
        f"demo tenant signing secret: {demo.signing_secret}  "
        f"({data_dir / 'demo.signing_secret'}; verifies the callbacks schedd signs)",
        "",
        "# in another shell:",
    ]
    if bin_dir is not None:
        lines.append(f'export PATH="{_double_quoted(str(bin_dir))}:$PATH"')
    exports = f"SCHEDCTL_URL={shlex.quote(','.join(urls))} SCHEDCTL_TOKEN={shlex.quote(demo.token)}"
    return [*lines, f"export {exports}", ""]


def stop_children(children: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every child, then SIGKILL what has not exited after the grace period."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def describe_exit(returncode: int) -> str:
    """A Popen return code in words: "exit code 3", or "killed by SIGKILL"."""
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


def quick_deaths_after(previous: int, restarted: bool, uptime_s: float) -> int:
    """The crash-loop count after a death: one more when the node died within CRASH_WINDOW_S of
    being restarted by `schedd dev`, else 0 (a node that ran a while, or was never restarted)."""
    return previous + 1 if restarted and uptime_s < CRASH_WINDOW_S else 0


class DevClusterStop(click.ClickException):
    """`schedd dev` stops the whole cluster: a crash loop, or every node down for good."""


@dataclass
class Node:
    """One `schedd serve` child and what `schedd dev` knows about it."""

    node_id: str
    config: Path
    log: Path
    url: str
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restarted: bool = False  # started again by `schedd dev` after a death
    state: Literal["up", "waiting", "down"] = "up"  # waiting: dead, to be restarted
    restart_at: float = 0.0
    awaiting_ready: bool = False  # restarted; its /readyz has not answered yet
    quick_deaths: int = 0
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid if self.process is not None else 0


def start_node(node: Node) -> None:
    """Start (or start again) the node's `schedd serve`, its output appended to its log."""
    with node.log.open("ab") as log:
        command = [sys.executable, "-m", "schedd", "serve", "--config", str(node.config)]
        node.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    node.processes.append(node.process)
    node.started_at = time.monotonic()


def is_ready(url: str) -> bool:
    """Whether the node at url answers /readyz with 200 (it sees a leader)."""
    try:
        urllib.request.urlopen(f"{url}/readyz", timeout=POLL_S).close()
    except (urllib.error.URLError, OSError):
        return False
    return True


@dataclass
class Supervisor:
    """Watches the nodes: reports a death, restarts the node after a pause, stops on a loop."""

    nodes: list[Node]
    restart_after_s: float
    say: Callable[[str], None]
    start: Callable[[Node], None] = start_node
    ready: Callable[[str], bool] = is_ready

    def tick(self, now: float) -> None:
        """One look at every node; raises DevClusterStop when the cluster must stop."""
        for node in self.nodes:
            if node.state == "up":
                self._check_up(node, now)
            elif node.state == "waiting" and now >= node.restart_at:
                self._restart(node, now)
        if all(node.state == "down" for node in self.nodes):
            raise DevClusterStop("every node is down (--restart-after 0); stopping")

    def _check_up(self, node: Node, now: float) -> None:
        assert node.process is not None
        if node.process.poll() is None:
            if node.awaiting_ready and self.ready(node.url):
                node.awaiting_ready = False
                self.say(f"node {node.node_id} is back (pid {node.pid}): {node.url} is ready")
            return
        self._died(node, node.process.returncode, now)

    def _died(self, node: Node, returncode: int, now: float) -> None:
        uptime = now - node.started_at
        node.quick_deaths = quick_deaths_after(node.quick_deaths, node.restarted, uptime)
        node.awaiting_ready = False
        self.say(
            f"node {node.node_id} (pid {node.pid}) died: {describe_exit(returncode)}, "
            f"after {uptime:.0f}s; log: {node.log}"
        )
        if node.quick_deaths >= CRASH_LOOP_LIMIT:
            raise DevClusterStop(
                f"node {node.node_id} died {node.quick_deaths} times in a row within "
                f"{CRASH_WINDOW_S:.0f}s of being restarted; stopping the dev cluster. "
                f"See its log: {node.log}"
            )
        if self.restart_after_s <= 0:
            node.state = "down"
            self.say(f"node {node.node_id} stays down (--restart-after 0); the others carry on")
            return
        node.state = "waiting"
        node.restart_at = now + self.restart_after_s
        self.say(f"restarting node {node.node_id} in {self.restart_after_s:g}s")

    def _restart(self, node: Node, now: float) -> None:
        self.start(node)
        node.started_at = now
        node.state = "up"
        node.restarted = True
        node.awaiting_ready = True
        self.say(f"node {node.node_id} restarted (pid {node.pid}); waiting for {node.url}/readyz")


def _interrupt(signum: int, frame: object) -> NoReturn:
    """SIGTERM stops `schedd dev` like Ctrl-C: every child is stopped too."""
    raise KeyboardInterrupt


def _echo_err(text: str) -> None:
    click.echo(text, err=True)


@click.command(
    epilog="""\b
Examples:
  schedd dev                  # three nodes on 127.0.0.1:8701-8703
  schedd dev --nodes 1 --data-dir /tmp/schedd-dev
  schedd dev --restart-after 0    # a node that dies stays down""",
)
@click.option("--nodes", type=click.Choice(["1", "3"]), default="3", show_default=True)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("var/dev"),
    show_default=True,
    help="Configs, secrets, logs and data; reused on the next run.",
)
@click.option("--api-port", default=API_BASE_PORT, show_default=True, help="First API port.")
@click.option("--raft-port", default=RAFT_BASE_PORT, show_default=True, help="First Raft port.")
@click.option(
    "--restart-after",
    type=click.FloatRange(min=0),
    default=RESTART_AFTER_S,
    show_default=True,
    help="Seconds before a node that died is started again; 0: leave it down.",
)
def dev(nodes: str, data_dir: Path, api_port: int, raft_port: int, restart_after: float) -> None:
    """Start a local cluster and a demo tenant; restart a node that dies; Ctrl-C stops it."""
    count = int(nodes)
    data_dir = data_dir.resolve()
    busy = [p for i in range(count) for p in (api_port + i, raft_port + i) if not _free(p)]
    if busy:
        raise click.UsageError(f"ports in use: {busy}; pick others with --api-port/--raft-port")
    configs = write_configs(data_dir, count, api_port, raft_port)
    members = [
        Node(path.stem, path, data_dir / f"{path.stem}.log", f"http://127.0.0.1:{api_port + i}")
        for i, path in enumerate(configs)
    ]
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        for node in members:
            start_node(node)
        click.echo(f"starting {count} node(s); logs in {data_dir}/n*.log", err=True)
        urls = [node.url for node in members]
        _wait_ready(urls, [node.process for node in members if node.process is not None])
        demo = demo_tenant(data_dir, urls[0], _secret(data_dir / "admin.token"))
        pids = [node.pid for node in members]
        click.echo("\n".join(banner(urls, data_dir, demo, schedctl_dir(), pids)))
        click.echo("ready; press Ctrl-C to stop (a node that dies is restarted)", err=True)
        supervisor = Supervisor(members, restart_after, _echo_err)
        while True:
            supervisor.tick(time.monotonic())
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        click.echo("\nstopping", err=True)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not orphan a child
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_children([p for node in members for p in node.processes])
