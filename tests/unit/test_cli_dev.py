"""What `schedd dev` prints once ready, and the demo tenant credentials it keeps."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from schedd.cli import devcluster
from schedd.cli.devcluster import (
    CRASH_WINDOW_S,
    Demo,
    DevClusterStop,
    Node,
    Supervisor,
    banner,
    demo_tenant,
    describe_exit,
    quick_deaths_after,
    schedctl_dir,
)

URLS = ["http://127.0.0.1:8701", "http://127.0.0.1:8702", "http://127.0.0.1:8703"]
DEMO = Demo("sk_abc-DEF_1", "whsec_c2VjcmV0+/=")
CREATED = {"tenant_id": "tnt_1", "token": "sk_new", "signing_secret": "whsec_new="}


def run_in_sh(lines: list[str], *names: str) -> list[str]:
    """Paste the lines after "# in another shell:" into sh, then print the named variables."""
    pasted = lines[lines.index("# in another shell:") :]
    script = "\n".join([*pasted, *(f'printf "%s\\n" "${name}"' for name in names)])
    result = subprocess.run(
        ["sh", "-c", script], capture_output=True, text=True, timeout=10, check=True
    )
    return result.stdout.splitlines()


def test_the_export_line_lists_every_node_and_the_demo_token(tmp_path: Path) -> None:
    lines = banner(URLS, tmp_path, DEMO, tmp_path / "bin")
    assert run_in_sh(lines, "SCHEDCTL_URL", "SCHEDCTL_TOKEN") == [",".join(URLS), DEMO.token]


def test_the_path_line_puts_schedctl_first_on_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / 'a $b `c` "d"'
    lines = banner(URLS, tmp_path, DEMO, bin_dir)
    assert 'export PATH="' in "\n".join(lines)
    path = run_in_sh(lines, "PATH")[0]
    assert path.split(":")[0] == str(bin_dir)
    assert len(path.split(":")) > 1  # the user's PATH follows


def test_without_a_schedctl_there_is_no_path_line(tmp_path: Path) -> None:
    assert not any("PATH" in line for line in banner(URLS, tmp_path, DEMO, None))


def test_the_signing_secret_and_where_it_is_kept_are_printed(tmp_path: Path) -> None:
    text = "\n".join(banner(URLS, tmp_path, DEMO, None))
    assert DEMO.signing_secret in text
    assert str(tmp_path / "demo.signing_secret") in text
    assert str(tmp_path / "demo.token") in text


def test_schedctl_dir_is_where_this_pythons_schedctl_is() -> None:
    found = schedctl_dir()
    assert found == Path(sys.executable).absolute().parent
    assert (found / "schedctl").exists()


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The admin requests demo_tenant makes, answered like a node would."""
    calls: list[tuple[str, str]] = []

    def call(url: str, token: str, method: str = "GET", body: Any = None) -> Any:
        calls.append((method, url.split("127.0.0.1:8701", 1)[1]))
        if url.endswith("/v1/tenants?limit=1000"):
            return {
                "tenants": [
                    {"tenant_id": "tnt_0", "name": "x"},
                    {"tenant_id": "tnt_1", "name": "demo"},
                ]
            }
        return CREATED

    monkeypatch.setattr(devcluster, "_call", call)
    return calls


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_demo_credentials_are_stored_0600_and_kept(
    tmp_path: Path, api: list[tuple[str, str]]
) -> None:
    first = demo_tenant(tmp_path, URLS[0], "adm_x")
    assert first == Demo("sk_new", "whsec_new=")
    assert api == [("POST", "/v1/tenants")]
    for name, value in (("demo.token", "sk_new"), ("demo.signing_secret", "whsec_new=")):
        assert (tmp_path / name).read_text().strip() == value
        assert mode(tmp_path / name) == 0o600
    assert demo_tenant(tmp_path, URLS[0], "adm_x") == first  # the next run of `schedd dev`
    assert len(api) == 1


def test_a_data_dir_without_the_secret_rotates_the_demo_tenant_once(
    tmp_path: Path, api: list[tuple[str, str]]
) -> None:
    (tmp_path / "demo.token").write_text("sk_old\n")  # an older `schedd dev` kept only this
    assert demo_tenant(tmp_path, URLS[0], "adm_x") == Demo("sk_new", "whsec_new=")
    assert api == [("GET", "/v1/tenants?limit=1000"), ("POST", "/v1/tenants/tnt_1/rotate")]
    assert mode(tmp_path / "demo.signing_secret") == 0o600
    assert mode(tmp_path / "demo.token") == 0o600


def test_the_node_lines_carry_each_pid(tmp_path: Path) -> None:
    lines = banner(URLS, tmp_path, DEMO, None, [11, 12, 13])
    assert lines[:3] == [f"node n{i}: {URLS[i - 1]}  (pid {10 + i})" for i in (1, 2, 3)]


@pytest.mark.parametrize(
    ("previous", "restarted", "uptime_s", "expected"),
    [
        (0, False, 1.0, 0),  # the first start: killing it is not a crash loop
        (0, True, 1.0, 1),
        (2, True, CRASH_WINDOW_S - 0.1, 3),
        (2, True, CRASH_WINDOW_S, 0),  # it ran a while: the count starts again
    ],
)
def test_a_death_soon_after_a_restart_counts_towards_a_crash_loop(
    previous: int, restarted: bool, uptime_s: float, expected: int
) -> None:
    assert quick_deaths_after(previous, restarted, uptime_s) == expected


def test_describe_exit() -> None:
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(-15) == "killed by SIGTERM"


class FakeProcess:
    """A `schedd serve` child that has exited with `returncode` (None: still running)."""

    def __init__(self, pid: int, returncode: int | None = None) -> None:
        self.pid = pid
        self.returncode = returncode

    def poll(self) -> int | None:
        return self.returncode


class Harness:
    """A Supervisor over fake nodes: what it says, and a way to kill a node."""

    def __init__(self, tmp_path: Path, restart_after_s: float, count: int = 3) -> None:
        self.said: list[str] = []
        self.next_pid = 100
        self.nodes = [
            Node(f"n{i}", tmp_path / f"n{i}.toml", tmp_path / f"n{i}.log", URLS[i - 1])
            for i in range(1, count + 1)
        ]
        for node in self.nodes:
            self.start(node)
            node.started_at = 0.0
        self.supervisor = Supervisor(
            self.nodes, restart_after_s, self.said.append, self.start, lambda url: True
        )

    def start(self, node: Node) -> None:
        self.next_pid += 1
        node.process = FakeProcess(self.next_pid)  # type: ignore[assignment]

    def kill(self, index: int, returncode: int = -9) -> None:
        process = self.nodes[index].process
        assert isinstance(process, FakeProcess)
        process.returncode = returncode


def test_a_dead_node_is_reported_restarted_after_the_pause_and_seen_back(tmp_path: Path) -> None:
    run = Harness(tmp_path, restart_after_s=10)
    run.kill(1)
    run.supervisor.tick(100.0)
    assert run.said == [
        f"node n2 (pid 102) died: killed by SIGKILL, after 100s; log: {tmp_path / 'n2.log'}",
        "restarting node n2 in 10s",
    ]
    run.supervisor.tick(109.0)
    assert len(run.said) == 2  # still in the pause
    run.supervisor.tick(110.0)
    assert run.said[2] == f"node n2 restarted (pid 104); waiting for {URLS[1]}/readyz"
    run.supervisor.tick(111.0)
    assert run.said[3] == f"node n2 is back (pid 104): {URLS[1]} is ready"


def test_three_quick_deaths_after_restarts_stop_the_cluster(tmp_path: Path) -> None:
    run = Harness(tmp_path, restart_after_s=1)
    now = 100.0
    run.kill(0, returncode=2)
    run.supervisor.tick(now)  # the first death: after the initial start, not a restart
    for _ in range(2):
        run.supervisor.tick(now := now + 1)  # restarted
        run.kill(0, returncode=2)
        run.supervisor.tick(now := now + 1)
    assert run.nodes[0].quick_deaths == 2
    run.supervisor.tick(now := now + 1)
    run.kill(0, returncode=2)
    with pytest.raises(DevClusterStop) as stopped:
        run.supervisor.tick(now + 1)
    message = stopped.value.message
    assert "node n1 died 3 times in a row" in message
    assert str(tmp_path / "n1.log") in message


def test_with_restart_after_0_a_dead_node_stays_down_and_all_down_stops(tmp_path: Path) -> None:
    run = Harness(tmp_path, restart_after_s=0, count=2)
    run.kill(0)
    run.supervisor.tick(100.0)
    assert run.said[-1] == "node n1 stays down (--restart-after 0); the others carry on"
    run.supervisor.tick(1000.0)
    assert run.nodes[0].state == "down"
    run.kill(1, returncode=1)
    with pytest.raises(DevClusterStop, match="every node is down"):
        run.supervisor.tick(1001.0)
