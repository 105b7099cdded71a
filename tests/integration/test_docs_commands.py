"""README quick start and docs/getting-started.md: each ```sh line runs on a real dev cluster."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.debian_machine import copy_machine
from tests.integration.test_schedd_dev import children_of, dev_cluster, leader_seen_by

pytestmark = pytest.mark.slow  # left out of `make check` (docs/testing.md)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Lines that cannot run in a test, each with why (matched on the line without its comment).
SKIPPED = {
    "make run": "starts the cluster: the test starts `schedd dev` itself",
    "make test": "runs the whole suite, this test included",
    'export PATH="/path/to/schedd/.venv/bin:$PATH"': "placeholder: the printed line is used",
    "watch -n1 ": "interactive, never ends",
}


def substituted(machine: Path) -> list[tuple[str, str]]:
    """Lines run with a substitution: (pattern, replacement), applied in order; `machine` the
    copy of tests/fixtures/debian-machine --machine reads (tests/debian_machine.py)."""
    return [
        # the placeholder export: the real printed one is pasted into the environment instead
        (r"^export SCHEDCTL_URL=http://127\.0\.0\.1:8701.*$", ":"),
        # long-running workers: one batch, short long-poll (the tests run as root already)
        (
            r'^(?:sudo -E "\$\(command -v schedctl\)"|schedctl) work (\S+) ',
            r"schedctl work \1 --once --wait 1s ",
        ),
        # no crontab in a test: a two-line one
        (r"^crontab -l \|", r"printf '*/5 * * * * echo hi\n0 3 * * * echo nightly\n' |"),
        # no machine to move in a test: a copy of a Debian machine's cron, its `crontab` a stand-in
        (
            r'^sudo -E "\$\(command -v schedctl\)" import-crontab --machine',
            f'PATH={shlex.quote(str(machine / "usr" / "bin"))}:"$PATH" '
            f"schedctl import-crontab --machine --root {shlex.quote(str(machine))}",
        ),
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
    cwd = tmp_path / "checkout"
    data_dir = cwd / "var" / "dev"
    data_dir.mkdir(parents=True)
    with dev_cluster(data_dir, restart_after_s=1, cwd=cwd) as dev:
        nodes, lines = dev.nodes, [line.rstrip("\n") for line in dev.out]
        pasted = "\n".join(line for line in lines if line.startswith("export "))
        env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        exported = subprocess.run(
            ["bash", "-c", pasted + "\nenv"], capture_output=True, text=True, env=env, check=True
        ).stdout
        env = dict(line.split("=", 1) for line in exported.splitlines() if "=" in line)
        assert Path(env["PATH"].split(":")[0]) == BIN and env["SCHEDCTL_TOKEN"].startswith("sk_")
        admin = (data_dir / "admin.token").read_text().strip()
        ran: list[str] = []
        substitutions = substituted(copy_machine(tmp_path / "machine"))
        for block in documented_blocks():
            for line in block:
                if skip_reason(line):
                    continue
                for pattern, replacement in substitutions:
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
        died = lambda: any("died: killed by SIGKILL" in line for line in dev.out)  # noqa: E731
        dev.wait_until(died, 10, "the killed leader reported")
        dev.known |= children_of(dev.process.pid)


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
