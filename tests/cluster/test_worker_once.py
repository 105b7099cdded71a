"""schedd.worker's effectively-once handlers on three real nodes: a worker process (tests/
once_worker.py) writes one row per run to the tenant's own SQLite or PostgreSQL database while
its node is killed mid-batch, the worker itself dies between a commit and its ack, and then the
leader is killed mid-batch. Messages are delivered twice (counted), every run's row is there
exactly once, and every run ends `succeeded`."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.brokers import require
from tests.cluster.test_dispatch_cluster import leader_of, runs_of
from tests.integration.api_helpers import Tenant, new_tenant
from tests.once_worker import CRASHED
from tests.servers import NodeProcess, http, make_nodes, running, wait_for, wait_ready

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
SECTIONS = '[dispatch]\nlease_ttl = "2s"\n'
WAVE = 12  # runs per wave: one wave for the worker's node, one for the leader
RETRY = {"max_attempts": 10, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    """Three nodes shared by the module; a test that kills one starts it again."""
    base: Path = tmp_path_factory.mktemp("worker-once")
    with running(make_nodes(base, 3, extra_sections=SECTIONS)) as nodes:
        yield nodes


@dataclass
class Scenario:
    """One tenant's queue, the worker processes consuming it and their event lines."""

    cluster: list[NodeProcess]
    tenant: Tenant
    store: list[str]  # the worker's database flags: ["--sqlite", PATH] or ["--postgres", DSN]
    tmp: Path
    queue: str = field(default_factory=lambda: f"q-{uuid.uuid4().hex[:10]}")
    table: str = field(default_factory=lambda: f"t{uuid.uuid4().hex[:10]}")
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    killed: list[NodeProcess] = field(default_factory=list)

    @property
    def events_path(self) -> Path:
        return self.tmp / f"{self.queue}.events"

    def events(self, kind: str) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        lines = self.events_path.read_text().splitlines()
        return [e for e in map(json.loads, lines) if e["event"] == kind]

    def start_worker(self, urls: list[str], *extra: str) -> subprocess.Popen[bytes]:
        args = ["--urls", ",".join(urls), "--token", self.tenant.token, "--queue", self.queue]
        args += ["--table", self.table, "--events", str(self.events_path), *self.store, *extra]
        with (self.tmp / f"{self.queue}.{len(self.workers)}.log").open("wb") as log:
            worker = subprocess.Popen(  # the child keeps its own descriptor of the log
                [sys.executable, "-m", "tests.once_worker", *args], stdout=log, stderr=log
            )
        self.workers.append(worker)
        return worker

    def wave(self) -> list[str]:
        """WAVE one-time jobs due now: their job ids."""
        body = {
            "schedule": {"delay": "0s"},
            "target": {"type": "queue", "name": self.queue},
            "retry": RETRY,
        }
        url = f"{self.cluster[0].url}/v1/jobs:batch"
        status, created, _ = http("POST", url, {"jobs": [body] * WAVE}, token=self.tenant.token)
        assert status == 200 and all("job_id" in r for r in created["results"]), created
        return [r["job_id"] for r in created["results"]]

    def started_of(self, jobs: list[str]) -> int:
        return sum(e["key"].split(":", 1)[0] in jobs for e in self.events("started"))

    def kill(self, node: NodeProcess) -> None:
        node.kill()
        self.killed.append(node)

    def revive(self) -> None:
        for node in self.killed:
            node.start()
        self.killed.clear()
        wait_ready(self.cluster)

    def keys(self, jobs: list[str]) -> set[str]:
        """The idempotency keys of the jobs' runs (one each), once every run succeeded."""
        node = next(n for n in self.cluster if n.is_running())

        def succeeded() -> set[str] | None:
            runs = [runs_of(node, self.tenant, job) for job in jobs]
            if not all(len(r) == 1 and r[0]["status"] == "succeeded" for r in runs):
                return None
            return {f"{job}:{r[0]['scheduled_at']}" for job, r in zip(jobs, runs, strict=True)}

        return wait_for(succeeded, 40, "every run succeeded")

    def stop(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(timeout=10)

    def log_tails(self) -> str:
        logs = sorted(self.tmp.glob(f"{self.queue}.*.log"))
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in logs)


def run_through_failures(scenario: Scenario, rows: Callable[[], list[str]]) -> None:
    """The failures, then the checks: `rows` reads the keys of the tenant's table's rows."""
    cluster = scenario.cluster
    wait_ready(cluster)
    leader = leader_of(cluster)
    ours, other = [n for n in cluster if n is not leader]
    urls = [ours.url, other.url, leader.url]  # the worker starts on `ours`, a follower
    # One message at a time: the wave lasts WAVE x 0.2 s, time enough to kill the node mid-way.
    first = scenario.start_worker(urls, "--crash-after-switch", "--concurrency", "1")
    wave_1 = scenario.wave()
    wait_for(lambda: scenario.started_of(wave_1) >= 1, 20, "the first wave's handlers")
    scenario.kill(ours)  # the worker's node, mid-batch: the worker moves on, then crashes
    assert first.wait(timeout=30) == CRASHED, scenario.log_tails()
    assert [e["failed"] for e in scenario.events("switched")] == [ours.url]
    scenario.start_worker(urls)
    scenario.revive()

    wave_2 = scenario.wave()
    wait_for(lambda: scenario.started_of(wave_2) >= 2, 20, "the second wave's handlers")
    scenario.kill(leader)  # mid-batch
    keys = scenario.keys(wave_1 + wave_2)
    scenario.stop()
    assert [w.returncode for w in scenario.workers] == [CRASHED, 0], scenario.log_tails()

    written = Counter(rows())
    assert set(written) == keys and set(written.values()) == {1}, written
    duplicates = scenario.events("duplicate")
    again = [e for e in scenario.events("started") if e["attempt"] > 1]
    assert duplicates and again, "no message was delivered twice"
    assert all(e["key"] in keys for e in duplicates)


@pytest.fixture
def scenario(
    cluster: list[NodeProcess], tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Scenario]:
    own = Scenario(cluster=cluster, tenant=new_tenant(cluster[0]), store=[], tmp=tmp_path)
    try:
        yield own
    except BaseException:
        sys.stderr.write(own.log_tails())
        raise
    finally:
        own.stop()
        own.revive()


def test_sqlite_once_writes_every_run_once_through_node_kills_and_a_crash(
    scenario: Scenario,
) -> None:
    database = scenario.tmp / "tenant.db"
    scenario.store = ["--sqlite", str(database)]

    def rows() -> list[str]:
        with sqlite3.connect(database) as db:
            return [key for (key,) in db.execute(f"SELECT key FROM {scenario.table}_effects")]

    run_through_failures(scenario, rows)


def test_postgres_once_writes_every_run_once_through_node_kills_and_a_crash(
    scenario: Scenario,
) -> None:
    require("postgres")
    import psycopg

    scenario.store = ["--postgres", POSTGRES_DSN]

    def rows() -> list[str]:
        with psycopg.connect(POSTGRES_DSN) as pg:
            query = f"SELECT key FROM {scenario.table}_effects"
            return [key for (key,) in pg.execute(query).fetchall()]

    try:
        run_through_failures(scenario, rows)
    finally:
        with psycopg.connect(POSTGRES_DSN, autocommit=True) as pg:
            for table in ("effects", "once"):
                pg.execute(f"DROP TABLE IF EXISTS {scenario.table}_{table}")
