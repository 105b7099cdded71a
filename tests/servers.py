"""Real `schedd serve` processes on free loopback ports, for integration and cluster tests.

Every process started here is stopped by the fixture that made it (terminate, wait, kill), and
its log is printed when a test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

from schedd.timeformat import parse_instant
from tests.ports import free_ports as free_ports  # where the tests have always found it

ADMIN_TOKEN = "adm_test_token_0123456789abcdef"
RAFT_SECRET = "raft_test_secret_0123456789abcdef"
READY_TIMEOUT_S = 60.0
# A cluster keeps the production election timeouts (1-2.5 s): shorter ones elect again whenever a
# node is starved of CPU for a moment, and four test files share two cores. A single node has no
# one to be deposed by: it waits out one timeout at start, and then leads for good (pysyncobj
# counts itself as the majority), so a short one only makes it ready 1-2 s sooner.
CLUSTER_ELECTION = 'election_timeout_min = "1s"\nelection_timeout_max = "2.5s"\n'
SINGLE_NODE_ELECTION = 'election_timeout_min = "100ms"\nelection_timeout_max = "250ms"\n'
T = TypeVar("T")


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A scripted HTTP server on a free loopback port, on its own thread: its URL; stopped on
    exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # A short poll: shutdown() waits for the loop to notice (0.5 s by default, per server).
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@dataclass
class NodeProcess:
    """One `schedd serve` child: its config, ports, log and process."""

    node_id: str
    config_path: Path
    data_dir: Path
    api_port: int
    raft_port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    tls: ssl.SSLContext | None = None  # set when the node serves HTTPS: verifies its certificate
    _terminated: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.api_port}"

    @property
    def raft(self) -> str:
        return f"127.0.0.1:{self.raft_port}"

    def start(self) -> None:
        env = {**os.environ, "SCHEDD_ADMIN_TOKEN": ADMIN_TOKEN, "SCHEDD_RAFT_SECRET": RAFT_SECRET}
        with self.log_path.open("ab") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [sys.executable, "-m", "schedd", "serve", "--config", str(self.config_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env | self.extra_env,
            )

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: the crash case."""
        if self.is_running():
            assert self.process is not None
            self.process.kill()
            self.process.wait(timeout=10)

    def terminate(self) -> None:
        """SIGTERM, not waited for (`stop` waits, without a second one: a SIGTERM that came
        after the node's event loop closed would kill it in the middle of its exit)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self._terminated = self.process

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM (unless `terminate` sent it), wait, then SIGKILL; returns the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            if self._terminated is not self.process:
                self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        return self.process.returncode

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def write_config(
    node: NodeProcess,
    peers: list[str],
    extra: str = "",
    extra_sections: str = "",
    api_extra: str = "",
) -> None:
    """Write the node's TOML: `extra` lines go inside [raft], `api_extra` lines inside [api],
    `extra_sections` (whole sections, such as a [dispatch] table) after them."""
    peer_list = ", ".join(json.dumps(p) for p in peers)
    sections = f"\n{extra_sections}" if extra_sections else ""
    node.config_path.write_text(
        f'[node]\nid = "{node.node_id}"\ndata_dir = "{node.data_dir}"\nlog_level = "info"\n\n'
        f'[api]\nlisten = "127.0.0.1:{node.api_port}"\n{api_extra}\n'
        f'[raft]\nlisten = "{node.raft}"\npeers = [{peer_list}]\n'
        f"{SINGLE_NODE_ELECTION if not peers else CLUSTER_ELECTION}"
        f"{extra}"
        f"{sections}"
    )


def make_nodes(
    base: Path, count: int, raft_extra: str = "", extra_sections: str = "", api_extra: str = ""
) -> list[NodeProcess]:
    """`count` nodes with configs under `base`, not started yet."""
    ports = free_ports(2 * count)
    nodes = [
        NodeProcess(
            node_id=f"n{i + 1}",
            config_path=base / f"n{i + 1}.toml",
            data_dir=base / f"n{i + 1}",
            api_port=ports[2 * i],
            raft_port=ports[2 * i + 1],
            log_path=base / f"n{i + 1}.log",
        )
        for i in range(count)
    ]
    for node in nodes:
        peers = [n.raft for n in nodes if n is not node]
        write_config(node, peers, raft_extra, extra_sections, api_extra)
    return nodes


def http(
    method: str,
    url: str,
    body: Any = None,
    *,
    token: str | None = ADMIN_TOKEN,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
    timeout_s: float = 15.0,
    context: ssl.SSLContext | None = None,
) -> tuple[int, Any, dict[str, str]]:
    """(status, decoded JSON or None, headers) of one request; HTTP errors are returned."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
            payload = response.read()
            status, response_headers = response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        payload, status, response_headers = exc.read(), exc.code, dict(exc.headers)
    return status, (json.loads(payload) if payload else None), response_headers


def metrics_text(
    url: str,
    *,
    token: str | None = ADMIN_TOKEN,
    timeout_s: float = 10.0,
    context: ssl.SSLContext | None = None,
) -> str:
    """GET <url>/metrics (the admin token opens it on the API port): the Prometheus text."""
    request = urllib.request.Request(f"{url}/metrics")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text: str = response.read().decode()
        return text


def wait_ready(nodes: list[NodeProcess], timeout_s: float = READY_TIMEOUT_S) -> None:
    """Until every running node answers /readyz 200 and they agree on one leader."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leaders = set()
        for node in nodes:
            if not node.is_running():
                raise AssertionError(f"{node.node_id} exited:\n{node.log_tail()}")
            with contextlib.suppress(OSError):
                status, _, _ = http(
                    "GET", f"{node.url}/readyz", token=None, timeout_s=2, context=node.tls
                )
                if status == 200:
                    _, state, _ = http(
                        "GET", f"{node.url}/v1/admin/state", timeout_s=5, context=node.tls
                    )
                    leaders.add(state["leader"])
                    continue
            leaders.add(None)
        if len(leaders) == 1 and None not in leaders:
            return
        time.sleep(0.1)
    tails = "\n".join(f"--- {n.node_id}\n{n.log_tail()}" for n in nodes)
    raise AssertionError(f"cluster not ready in {timeout_s}s\n{tails}")


@contextlib.contextmanager
def running(nodes: list[NodeProcess]) -> Iterator[list[NodeProcess]]:
    """Start the nodes, wait until ready, and always stop them (logs shown on failure)."""
    try:
        for node in nodes:
            node.start()
        wait_ready(nodes)
        yield nodes
    except BaseException:
        for node in nodes:
            sys.stderr.write(f"--- log of {node.node_id}\n{node.log_tail()}\n")
        raise
    finally:
        stop_all(nodes)


def stop_all(nodes: list[NodeProcess]) -> None:
    """SIGTERM every node at once, then wait for each (SIGKILL past `stop`'s timeout): a cluster
    stops in the time of its slowest node, not in the sum of its nodes' times."""
    for node in nodes:
        node.terminate()
    for node in nodes:
        node.stop()


def wait_for(condition: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll `condition` until it returns something truthy; fail naming `what` after the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}: {result!r}")
        time.sleep(0.1)


def ms(instant: str) -> int:
    """Epoch ms of an RFC 3339 instant."""
    return parse_instant(instant, field="instant")


def now_ms() -> int:
    """The wall clock in epoch ms."""
    return int(time.time() * 1000)
