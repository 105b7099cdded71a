"""`schedd dev` end to end: the lines it prints work in a new shell; the demo credentials stay."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.ports import free_port_runs
from tests.servers import free_ports, http

pytestmark = pytest.mark.slow  # left out of `make check` (docs/testing.md)

SCHEDD = str(Path(sys.executable).with_name("schedd"))
READY_TIMEOUT_S = 90.0


def run_dev(
    data_dir: Path,
    api_port: int,
    raft_port: int,
    while_running: Callable[[list[str]], None] | None = None,
) -> list[str]:
    """Start `schedd dev --nodes 1`, return what it printed once ready (after `while_running`
    with those lines, if given), stop it with SIGINT."""
    command = [SCHEDD, "dev", "--nodes", "1", "--data-dir", str(data_dir)]
    command += ["--api-port", str(api_port), "--raft-port", str(raft_port)]
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        # Ctrl-C works even when these tests run in a background job of a shell script, whose
        # children inherit SIGINT ignored (POSIX), as when CI is started with `&`.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: list[str] = []
    assert child.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(child.stdout or []), daemon=True)
    reader.start()
    deadline = time.monotonic() + READY_TIMEOUT_S
    try:
        while not any(line.startswith("export SCHEDCTL_URL=") for line in lines):
            assert child.poll() is None, f"schedd dev exited {child.returncode}: {lines}"
            assert time.monotonic() < deadline, f"not ready in {READY_TIMEOUT_S}s: {lines}"
            time.sleep(0.1)
        if while_running is not None:
            while_running([line.rstrip("\n") for line in lines])
    finally:
        child.send_signal(signal.SIGINT)
        child.wait(timeout=30)
    reader.join(timeout=5)
    child.stdout.close()
    return [line.rstrip("\n") for line in lines]


def without_pids(lines: list[str]) -> list[str]:
    """The lines with each node's pid (new on every run) replaced by N."""
    return [re.sub(r"\(pid \d+\)", "(pid N)", line) for line in lines]


def printed(lines: list[str], label: str) -> str:
    """The value on the line `label: VALUE  (FILE...)`."""
    line = next(line for line in lines if line.startswith(label + ": "))
    return line.removeprefix(label + ": ").split()[0]


def test_schedd_dev_prints_lines_that_work_and_keeps_the_demo_credentials(
    tmp_path: Path,
) -> None:
    api_port, raft_port = free_ports(2)
    data_dir = tmp_path / "dev"
    first = run_dev(data_dir, api_port, raft_port)
    token = printed(first, "demo tenant token")
    secret = printed(first, "demo tenant signing secret")
    assert token.startswith("sk_") and secret.startswith("whsec_")
    for name, value in (("demo.token", token), ("demo.signing_secret", secret)):
        path = data_dir / name
        assert path.read_text().strip() == value
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    pasted = first[first.index("# in another shell:") :]
    assert any(line.startswith("export PATH=") for line in pasted)
    assert f"SCHEDCTL_URL=http://127.0.0.1:{api_port} SCHEDCTL_TOKEN={token}" in pasted[-2]

    second = run_dev(data_dir, api_port, raft_port)  # a restart: the same data, the same lines
    assert printed(second, "demo tenant token") == token
    assert printed(second, "demo tenant signing secret") == secret
    assert without_pids(second) == without_pids(first)


def test_schedd_dev_seals_payloads_and_connection_urls_at_rest(tmp_path: Path) -> None:
    password, marker = "hunter2-dev-c0nn3ction-pw", "dev-payload-marker-5e1d"
    api_port, raft_port = free_ports(2)
    data_dir = tmp_path / "dev"

    def write(lines: list[str]) -> None:
        token, url = printed(lines, "demo tenant token"), f"http://127.0.0.1:{api_port}"
        connection = {"name": "r", "url": f"redis://sender:{password}@127.0.0.1:6390/2"}
        status, answer, _ = http("POST", f"{url}/v1/connections", connection, token=token)
        assert status == 201, answer
        job = {"schedule": {"cron": "0 3 * * *"}, "target": {"type": "queue", "name": "q"}}
        job["payload"] = {"note": marker}
        status, answer, _ = http("POST", f"{url}/v1/jobs", job, token=token)
        assert status == 201 and answer["payload"] == {"note": marker}, answer

    run_dev(data_dir, api_port, raft_port, while_running=write)
    files = [path for path in data_dir.rglob("*") if path.is_file()]
    assert any(path.name == "raft.journal" for path in files), files
    for path in files:  # the Raft journal, SQLite and its WAL, logs, configs
        content = path.read_bytes()
        assert password.encode() not in content and marker.encode() not in content, path
    assert stat.S_IMODE((data_dir / "payload.keys").stat().st_mode) == 0o600


def test_the_pasted_lines_reach_schedctl_from_a_clean_shell(tmp_path: Path) -> None:
    api_port, raft_port = free_ports(2)
    data_dir = tmp_path / "dev"
    lines = run_dev(data_dir, api_port, raft_port)
    pasted = "\n".join(lines[lines.index("# in another shell:") :])
    # the cluster is stopped now: schedctl is found and tries the printed URL with the token
    result = subprocess.run(
        ["sh", "-c", pasted + "\nschedctl ls --json --timeout 2"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert result.returncode == 3, result.stderr  # cluster unavailable, not "command not found"
    assert f"127.0.0.1:{api_port}" in result.stderr
    assert result.stdout == ""


def alive(pid: int) -> bool:
    """Whether pid is a running process (a zombie is dead)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat_line.rsplit(")", 1)[1].split()[0] != "Z"


def children_of(pid: int) -> set[int]:
    """The pids whose parent is pid (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.add(int(entry.name))
    return found


def ready(url: str) -> bool:
    try:
        urllib.request.urlopen(f"{url}/readyz", timeout=2).close()
    except (urllib.error.URLError, OSError):
        return False
    return True


def leader_seen_by(url: str, admin_token: str) -> str | None:
    request = urllib.request.Request(f"{url}/v1/cluster")
    request.add_header("Authorization", f"Bearer {admin_token}")
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return json.loads(response.read()).get("leader")  # type: ignore[no-any-return]
    except (urllib.error.URLError, OSError, ValueError):
        return None


def wait_until(
    dev: subprocess.Popen[str],
    out: list[str],
    condition: Callable[[], bool],
    timeout_s: float,
    what: str,
) -> None:
    """Wait for condition while `schedd dev` keeps running (out: what it printed)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert dev.poll() is None, f"schedd dev exited {dev.returncode} (not {what}): {out}"
        assert time.monotonic() < deadline, f"not {what} in {timeout_s}s: {out}"
        time.sleep(0.2)


PID_LINE = re.compile(r"^node (n\d): (\S+)  \(pid (\d+)\)$")


@dataclass
class DevRun:
    """A running `schedd dev`: its process, what it printed, its nodes (id -> url, pid) and
    every `schedd serve` pid seen, so the fixture can reap them all."""

    process: subprocess.Popen[str]
    out: list[str]
    nodes: dict[str, tuple[str, int]]
    known: set[int]

    def wait_until(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        wait_until(self.process, self.out, condition, timeout_s, what)


@contextlib.contextmanager
def dev_cluster(data_dir: Path, restart_after_s: int, cwd: Path | None = None) -> Iterator[DevRun]:
    """`schedd dev --nodes 3` on free ports, up to its banner; stopped and reaped afterwards."""
    api_port, raft_port = free_port_runs(3)
    command = [SCHEDD, "dev", "--nodes", "3", "--data-dir", str(data_dir)]
    command += ["--restart-after", str(restart_after_s)]
    command += ["--api-port", str(api_port), "--raft-port", str(raft_port)]
    dev = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(dev.stdout or []), daemon=True)
    reader.start()
    run = DevRun(dev, out, {}, set())
    try:
        banner = lambda: any(line.startswith("export SCHEDCTL_URL=") for line in out)  # noqa: E731
        run.wait_until(banner, READY_TIMEOUT_S, "ready")
        lines = [line.rstrip("\n") for line in out]
        run.nodes = {m[1]: (m[2], int(m[3])) for line in lines if (m := PID_LINE.match(line))}
        run.known |= {pid for _, pid in run.nodes.values()} | children_of(dev.pid)
        yield run
    finally:
        if dev.poll() is None:
            run.known |= children_of(dev.pid)
            dev.send_signal(signal.SIGTERM)
            try:
                dev.wait(timeout=20)
            except subprocess.TimeoutExpired:
                dev.kill()
                dev.wait(timeout=10)
        for pid in run.known:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        reader.join(timeout=5)
        if dev.stdout is not None:
            dev.stdout.close()


def test_schedd_dev_keeps_the_others_running_when_the_leader_is_killed_and_restarts_it(
    tmp_path: Path,
) -> None:

    data_dir = tmp_path / "dev"
    with dev_cluster(data_dir, restart_after_s=2) as run:
        dev, out, nodes = run.process, run.out, run.nodes
        assert sorted(nodes) == ["n1", "n2", "n3"], out
        assert run.known == children_of(dev.pid)  # the printed pids are the `schedd serve` children
        admin = (data_dir / "admin.token").read_text().strip()
        victim = leader_seen_by(nodes["n1"][0], admin)
        assert victim in nodes, victim
        url, pid = nodes[victim]
        os.kill(pid, signal.SIGKILL)

        died = f"node {victim} (pid {pid}) died: killed by SIGKILL"
        run.wait_until(lambda: any(died in line for line in out), 30, "reported")
        assert any(str(data_dir / f"{victim}.log") in line for line in out if died in line)
        survivors = {n: u for n, (u, _) in nodes.items() if n != victim}

        def carry_on() -> bool:  # both survivors ready, agreeing on a leader among them
            leaders = {leader_seen_by(u, admin) for u in survivors.values()}
            new_leader = len(leaders) == 1 and leaders <= set(survivors)
            return new_leader and all(ready(u) for u in survivors.values())

        run.wait_until(carry_on, 60, "a new leader among the survivors")
        assert dev.poll() is None, out  # `schedd dev` is still running

        back = f"node {victim} is back"
        run.wait_until(lambda: any(back in line for line in out), 90, "back")
        assert ready(url)
        run.known |= children_of(dev.pid)
        assert len(run.known) == 4 and pid not in children_of(dev.pid), run.known
        assert dev.poll() is None, out

        dev.send_signal(signal.SIGTERM)
        assert dev.wait(timeout=30) == 0, out
        assert [p for p in run.known if alive(p)] == []
