"""README quick start and docs/getting-started.md: each ```sh line runs on a real dev cluster."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.integration.test_schedd_dev import (
    PID_LINE,
    READY_TIMEOUT_S,
    SCHEDD,
    children_of,
    free_port_runs,
    leader_seen_by,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Lines that cannot run in a test, each with why (matched on the line without its comment).
SKIPPED = {
    "make run": "starts the cluster: the test starts `schedd dev` itself",
    "make test": "runs the whole suite, this test included",
    'export PATH="/path/to/schedd/.venv/bin:$PATH"': "placeholder: the printed line is used",
    "watch -n1 ": "interactive, never ends",
}
# Lines run with a substitution: (pattern, replacement), applied in order.
SUBSTITUTED: list[tuple[str, str]] = [
    # the placeholder export: the real printed one is pasted into the environment instead
    (r"^export SCHEDCTL_URL=http://127\.0\.0\.1:8701.*$", ":"),
    # long-running workers: one batch, short long-poll
    (r"^schedctl work (\S+) ", r"schedctl work \1 --once --wait 1s "),
    # no crontab in a test: a two-line one
    (r"^crontab -l \|", r"printf '*/5 * * * * echo hi\n0 3 * * * echo nightly\n' |"),
]


def sh_blocks(text: str) -> list[list[str]]:
    """The command lines of each ```sh block (comments after `    #` dropped)."""
    blocks = re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M)
    return [
        [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]
        for block in blocks
    ]


def documented_blocks() -> list[list[str]]:
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    getting_started = (ROOT / "docs" / "getting-started.md").read_text()
    return sh_blocks(quick_start) + sh_blocks(getting_started)


def skip_reason(line: str) -> str | None:
    return next((why for prefix, why in SKIPPED.items() if line.startswith(prefix)), None)


def test_every_documented_command_runs_on_a_dev_cluster(tmp_path: Path) -> None:
    api_port, raft_port = free_port_runs(3)
    cwd = tmp_path / "checkout"
    data_dir = cwd / "var" / "dev"
    data_dir.mkdir(parents=True)
    command = [SCHEDD, "dev", "--nodes", "3", "--data-dir", str(data_dir), "--restart-after", "1"]
    command += ["--api-port", str(api_port), "--raft-port", str(raft_port)]
    dev = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(dev.stdout or []), daemon=True)
    reader.start()
    known: set[int] = set()
    try:

        def banner_printed() -> bool:
            return any(line.startswith("export SCHEDCTL_URL=") for line in out)

        wait_until(dev, out, banner_printed, READY_TIMEOUT_S, "ready")
        known |= children_of(dev.pid)
        lines = [line.rstrip("\n") for line in out]
        nodes = {m[1]: (m[2], int(m[3])) for line in lines if (m := PID_LINE.match(line))}
        pasted = "\n".join(line for line in lines if line.startswith("export "))
        env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        exported = subprocess.run(
            ["bash", "-c", pasted + "\nenv"], capture_output=True, text=True, env=env, check=True
        ).stdout
        env = dict(line.split("=", 1) for line in exported.splitlines() if "=" in line)
        assert Path(env["PATH"].split(":")[0]) == BIN and env["SCHEDCTL_TOKEN"].startswith("sk_")
        admin = (data_dir / "admin.token").read_text().strip()
        ran: list[str] = []
        for block in documented_blocks():
            for line in block:
                if skip_reason(line):
                    continue
                for pattern, replacement in SUBSTITUTED:
                    line = re.sub(pattern, replacement, line)
                if line.startswith("kill -9 "):  # the failover: kill the real leader
                    leader = leader_seen_by(nodes["n1"][0], admin)
                    assert leader in nodes, leader
                    line = f"kill -9 {nodes[leader][1]}"
                if "<job_id>" in line:
                    jobs = json.loads(run(["schedctl ls --json"], cwd, env))["jobs"]
                    line = line.replace("<job_id>", jobs[0]["job_id"])
                run(["set -e", line], cwd, env)
                ran.append(line)
        assert any(line.startswith("kill -9 ") for line in ran), ran
        assert len(ran) >= 12, ran
        died = lambda: any("died: killed by SIGKILL" in line for line in out)  # noqa: E731
        wait_until(dev, out, died, 10, "the killed leader reported")
        known |= children_of(dev.pid)
    finally:
        if dev.poll() is None:
            known |= children_of(dev.pid)
            dev.send_signal(signal.SIGTERM)
            try:
                dev.wait(timeout=20)
            except subprocess.TimeoutExpired:
                dev.kill()
                dev.wait(timeout=10)
        for pid in known:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        reader.join(timeout=5)
        if dev.stdout is not None:
            dev.stdout.close()


def run(lines: list[str], cwd: Path, env: dict[str, str]) -> str:
    """Run lines in bash; assert exit 0, showing the command and its output otherwise."""
    script = "\n".join(lines)
    result = subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, (
        f"$ {script}\nexit {result.returncode}\n"
        f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    )
    return result.stdout
