"""`schedd dev` end to end: the lines it prints work in a new shell; the demo credentials stay."""

from __future__ import annotations

import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.servers import free_ports

SCHEDD = str(Path(sys.executable).with_name("schedd"))
READY_TIMEOUT_S = 90.0


def run_dev(data_dir: Path, api_port: int, raft_port: int) -> list[str]:
    """Start `schedd dev --nodes 1`, return what it printed once ready, stop it with SIGINT."""
    command = [SCHEDD, "dev", "--nodes", "1", "--data-dir", str(data_dir)]
    command += ["--api-port", str(api_port), "--raft-port", str(raft_port)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
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
    finally:
        child.send_signal(signal.SIGINT)
        child.wait(timeout=30)
    reader.join(timeout=5)
    child.stdout.close()
    return [line.rstrip("\n") for line in lines]


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
    assert second == first


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
