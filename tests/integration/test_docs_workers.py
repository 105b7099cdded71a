"""docs/workers.md against a real node: each ```sh block runs as one bash script, each ```python
block as a program that must do its work and exit 0 on SIGTERM. Every block has a tenant of its
own (its queue `reports` starts empty) and a job due at once (the schedctl block makes its own).
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.brokers import require
from tests.servers import NodeProcess, http, wait_for

PAGE = Path(__file__).resolve().parents[2] / "docs" / "workers.md"
BIN = Path(sys.executable).parent
POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
# `schedctl work` runs until stopped: here one batch
SUBSTITUTED = [(r"^schedctl work reports ", "schedctl work reports --once --wait 10s ")]


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", PAGE.read_text(), re.S | re.M)


class Tenant:
    def __init__(self, node: NodeProcess, tmp: Path) -> None:
        status, created, _ = http(
            "POST", f"{node.url}/v1/tenants", {"name": f"docs-{uuid.uuid4().hex[:8]}"}
        )
        assert status == 201, created
        self.node, self.token, self.tmp = node, str(created["token"]), tmp

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_")}
        env["PATH"] = f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}"
        return env | {"SCHEDCTL_URL": self.node.url, "SCHEDCTL_TOKEN": self.token} | extra

    def job(self) -> str:
        body = {
            "schedule": {"delay": "0s"},
            "target": {"type": "queue", "name": "reports"},
            "payload": {"team": 7},
        }
        status, job, _ = http("POST", f"{self.node.url}/v1/jobs", body, token=self.token)
        assert status == 201, job
        return str(job["job_id"])

    def runs(self) -> list[dict[str, Any]]:
        status, page, _ = http("GET", f"{self.node.url}/v1/jobs", token=self.token)
        assert status == 200, page
        found = []
        for job in page["jobs"]:
            url = f"{self.node.url}/v1/jobs/{job['job_id']}/runs"
            found += http("GET", url, token=self.token)[1]["runs"]
        return found

    def succeeded(self) -> bool:
        runs = self.runs()
        return bool(runs) and all(run["status"] == "succeeded" for run in runs)


@pytest.fixture
def tenant(node: NodeProcess, tmp_path: Path) -> Tenant:
    return Tenant(node, tmp_path)


def test_the_page_has_the_blocks_this_test_runs() -> None:
    assert len(blocks("sh")) == 2 and len(blocks("python")) == 3


@pytest.mark.parametrize(
    ("index", "printed"), [(0, r'job_\w+:\S+Z attempt 1: {"team":7}'), (1, "7")]
)
def test_the_sh_blocks_run(tenant: Tenant, index: int, printed: str) -> None:
    script = blocks("sh")[index]
    for pattern, replacement in SUBSTITUTED:
        script = re.sub(pattern, replacement, script, flags=re.M)
    if "schedctl add" not in script:
        tenant.job()
        wait_for(tenant.runs, 15, "the run")
    result = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=tenant.tmp,
        env=tenant.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, f"{script}\n--- stdout\n{result.stdout}\n--- {result.stderr}"
    assert any(re.fullmatch(printed, line) for line in result.stdout.splitlines()), result.stdout
    wait_for(tenant.succeeded, 15, "the run acked")


def run_program(tenant: Tenant, source: str, done: Callable[[], Any], **env: str) -> str:
    """Start the block as a program, wait for `done`, SIGTERM it: it exits 0. Its output."""
    (tenant.tmp / "example.py").write_text(source)
    log = tenant.tmp / "example.log"
    tenant.job()
    with log.open("w") as out:  # the program keeps its own descriptor
        program = subprocess.Popen(
            [sys.executable, "example.py"],
            cwd=tenant.tmp,
            env=tenant.env(**env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: done() or program.poll() is not None, 20, "the example's work")
        assert program.poll() is None, log.read_text()
        wait_for(tenant.succeeded, 15, "the run acked")
        program.send_signal(signal.SIGTERM)
        program.wait(timeout=15)
    finally:
        if program.poll() is None:
            program.kill()
            program.wait(timeout=10)
    assert program.returncode == 0, log.read_text()
    return log.read_text()


def test_the_first_program_handles_the_message(tenant: Tenant) -> None:
    log = tenant.tmp / "example.log"
    out = run_program(tenant, blocks("python")[0], lambda: "report for team" in log.read_text())
    assert re.fullmatch(r"report for team 7 \(job_\w+:\S+Z\)\n", out), out


def test_the_sqlite_once_program_writes_the_run_once(tenant: Tenant) -> None:
    database = tenant.tmp / "app.db"

    def rows() -> list[tuple[Any, ...]]:
        if not database.exists():
            return []
        with sqlite3.connect(database) as db:
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
            return db.execute("SELECT * FROM reports").fetchall() if "reports" in tables else []

    run_program(tenant, blocks("python")[1], rows)
    [(team, run)] = rows()
    assert team == 7 and run.startswith("job_")
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT key FROM schedd_once").fetchall() == [(run,)]


def test_the_postgres_once_program_writes_the_run_once(tenant: Tenant) -> None:
    require("postgres")
    import psycopg

    schema = f"docs_{uuid.uuid4().hex[:10]}"
    dsn = f"{POSTGRES_DSN}?options=-csearch_path%3D{schema}"
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as pg:
        pg.execute(f"CREATE SCHEMA {schema}")

    def rows() -> list[tuple[Any, ...]]:
        with psycopg.connect(POSTGRES_DSN) as pg:
            exists = pg.execute("SELECT to_regclass(%s)", (f"{schema}.reports",)).fetchone()
            if exists is None or exists[0] is None:
                return []
            return pg.execute(f"SELECT team, run FROM {schema}.reports").fetchall()

    try:
        run_program(tenant, blocks("python")[2], rows, DATABASE_URL=dsn)
        [(team, run)] = rows()
        assert team == 7 and run.startswith("job_")
    finally:
        with psycopg.connect(POSTGRES_DSN, autocommit=True) as pg:
            pg.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
