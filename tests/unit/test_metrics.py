"""Metrics: scrape-time store gauges, the queue label cap, claim and delivery recording, the
request middleware's route labels, and the collector's behaviour when the store cannot be read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from schedd import metrics
from schedd.api.http import metrics_middleware
from schedd.model import RaftView
from schedd.store import alerts
from schedd.store import gauges as store_gauges
from schedd.store.db import Database, connect
from tests.conftest import NOW_MS, Applier
from tests.unit.test_dispatcher import Cluster


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


def add_message(db: Database, msg_id: str, queue: str, *, visible_at: int, receipt: Any) -> None:
    db.conn.execute(
        "INSERT INTO messages (msg_id, tenant_id, queue, job_id, scheduled_at_ms, attempt, "
        "visible_at_ms, receipt, payload, retry) VALUES (?, 't1', ?, ?, 0, 1, ?, ?, 'null', '{}')",
        (msg_id, queue, msg_id, visible_at, receipt),
    )


def add_dead(db: Database, dl_id: str, target: dict[str, Any]) -> None:
    db.conn.execute(
        "INSERT INTO deadletters (id, tenant_id, job_id, scheduled_at_ms, attempts, error, "
        "target, payload, created_at_ms) VALUES (?, 't1', ?, 0, 3, 'x', ?, 'null', 0)",
        (dl_id, dl_id, json.dumps(target)),
    )


def fill_store(db: Database) -> None:
    """Two queues, a dead HTTP run, due rows (late and future), an outbox row and leases."""
    add_message(db, "m1", "mail", visible_at=NOW_MS - 1, receipt=None)  # ready
    add_message(db, "m2", "mail", visible_at=NOW_MS - 1, receipt="r.m2")  # expired: ready
    add_message(db, "m3", "mail", visible_at=NOW_MS + 9_000, receipt="r.m3")  # in flight
    add_message(db, "m4", "mail", visible_at=NOW_MS + 9_000, receipt=None)  # delayed (retry)
    add_message(db, "m5", "jobs", visible_at=NOW_MS, receipt=None)
    add_dead(db, "d1", {"type": "queue", "name": "mail"})
    add_dead(db, "d2", {"type": "http", "url": "https://x.example"})
    for partition, fire_at in ((0, NOW_MS - 5_000), (3, NOW_MS - 1_000), (1, NOW_MS + 60_000)):
        db.conn.execute(
            "INSERT INTO due (partition, fire_at_ms, job_id, scheduled_at_ms) VALUES (?, ?, ?, 0)",
            (partition, fire_at, f"job{partition}"),
        )
    db.conn.execute(
        "INSERT INTO outbox (partition, tenant_id, job_id, scheduled_at_ms, attempt, due_at_ms) "
        "VALUES (0, 't1', 'job9', 0, 1, 0)"
    )
    db.conn.executemany(
        "INSERT INTO leases (partition, node_id, epoch, expires_at_ms) VALUES (?, ?, 1, ?)",
        [(0, "n1", NOW_MS + 1), (1, "n1", NOW_MS + 1), (2, "n1", NOW_MS - 1), (3, "n2", NOW_MS)],
    )


def test_store_gauges_count_backlog_queues_outbox_dead_letters_and_owned_partitions(
    db: Database,
) -> None:
    fill_store(db)
    conn = connect(db.path, readonly=True)
    try:
        gauges = store_gauges.read_store(conn, node_id="n1", partitions=4, now_ms=NOW_MS)
    finally:
        conn.close()
    assert gauges.due_backlog == 2
    assert gauges.oldest_due_age_s == 5.0
    assert gauges.queues == {
        "mail": {"ready": 2, "in_flight": 1, "delayed": 1, "dead": 1},
        "jobs": {"ready": 1, "in_flight": 0, "delayed": 0, "dead": 0},
    }
    assert (gauges.outbox, gauges.deadletters, gauges.partitions_owned) == (1, 2, 2)


def test_invisible_messages_past_the_split_budget_count_as_in_flight(
    db: Database, monkeypatch: Any
) -> None:
    for i in range(5):
        add_message(db, f"m{i}", "q", visible_at=NOW_MS + 1_000, receipt=None)
    monkeypatch.setattr(store_gauges, "SPLIT_BUDGET", 2)
    conn = connect(db.path, readonly=True)
    try:
        counts = store_gauges.queue_counts(conn, NOW_MS)
    finally:
        conn.close()
    assert counts["q"] == {"ready": 0, "in_flight": 3, "delayed": 2, "dead": 0}


def test_queue_labels_keep_the_deepest_queues_and_fold_the_rest_into_other() -> None:
    counts = {f"q{i}": {"ready": i, "in_flight": 0, "delayed": 1, "dead": 0} for i in range(1, 6)}
    top = metrics.top_queues(counts, limit=2)
    assert list(top) == ["q5", "q4", metrics.OTHER_QUEUES]
    assert top[metrics.OTHER_QUEUES] == {
        "ready": 1 + 2 + 3,
        "in_flight": 0,
        "delayed": 3,
        "dead": 0,
    }
    assert metrics.top_queues(counts, limit=5).keys() == counts.keys()


def scrape(collector: metrics.NodeCollector) -> dict[str, list[Any]]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = metrics.exposition(registry).decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def collector(path: Path | str, status: RaftView) -> metrics.NodeCollector:
    return metrics.NodeCollector(
        node_id="n1",
        partitions=4,
        connect=lambda: connect(path, readonly=True),
        read_store=store_gauges.read_store,
        status=lambda: status,
        commit_index=lambda: 12,
        snapshot_path=Path(path).with_name("raft.snapshot"),
        clock_ms=lambda: NOW_MS,
    )


def test_collector_exports_raft_role_and_store_gauges(db: Database) -> None:
    fill_store(db)
    status = RaftView(
        address="127.0.0.1:1", role="leader", leader="127.0.0.1:1", term=3, applied_index=11
    )
    families = scrape(collector(db.path, status))
    roles = {s.labels["role"]: s.value for s in families["schedd_raft_role"]}
    assert roles == {"leader": 1, "follower": 0, "candidate": 0, "starting": 0}
    assert families["schedd_raft_term"][0].value == 3
    assert families["schedd_raft_commit_index"][0].value == 12
    assert families["schedd_raft_applied_index"][0].value == 11
    assert families["schedd_raft_leader_known"][0].value == 1
    assert families["schedd_due_backlog"][0].value == 2
    queue = {
        (s.labels["queue"], s.labels["state"]): s.value for s in families["schedd_queue_messages"]
    }
    assert queue[("mail", "in_flight")] == 1 and queue[("jobs", "ready")] == 1
    assert "schedd_snapshot_bytes" not in families  # no snapshot written yet
    assert "schedd_claims_total" in {s.name for f in families.values() for s in f}


def test_alerts_pending_counts_alerts_not_done_and_every_result_is_exported(
    db: Database,
) -> None:
    status = RaftView(address="a:1", role="leader", leader="a:1", term=1, applied_index=0)
    with db.transaction(applied_index=0) as tx:
        for _ in range(3):
            alerts.add(tx, tenant_id="t1", job_id="j", url="https://x.example", body="{}", at_ms=1)
        tx.execute("UPDATE alerts SET next_at_ms = NULL WHERE alert_id = 1")  # sent
    families = scrape(collector(db.path, status))
    assert families["schedd_alerts_pending"][0].value == 2
    results = {s.labels["result"] for s in families["schedd_alerts"] if s.name.endswith("_total")}
    assert results == {"sent", "retried", "failed"}


def test_collector_leaves_store_gauges_out_when_the_store_cannot_be_read(tmp_path: Path) -> None:
    missing = tmp_path / "nothing-here" / "state.db"
    status = RaftView(address="a:1", role="candidate", leader=None, term=0, applied_index=0)
    families = scrape(collector(missing, status))
    assert families["schedd_raft_leader_known"][0].value == 0
    assert "schedd_due_backlog" not in families


def test_dispatcher_counts_claims_and_observes_claim_lag(apply: Applier, db: Database) -> None:
    cluster = Cluster(apply, db)
    start = 1_790_000_000_000
    for i in range(3):
        cluster.add_job(f"job_lag{i}", {"schedule": {"run_at": "2026-09-21T14:13:25Z"}}, start)
    claimed = sample("schedd_claims_total", {"result": "claimed"})
    lags = sample("schedd_claim_lag_seconds_count")
    cluster.now = start
    cluster.run_until(start + 10_000)
    assert sample("schedd_claims_total", {"result": "claimed"}) == claimed + 3
    assert sample("schedd_claim_lag_seconds_count") == lags + 3


def test_delivery_records_first_attempt_lag_and_counts_retries() -> None:
    lag = sample("schedd_delivery_lag_seconds_count", {"target": "queue"})
    lag_sum = sample("schedd_delivery_lag_seconds_sum", {"target": "queue"})
    retries = sample("schedd_retries_total", {"target": "queue"})
    metrics.record_delivery("queue", 1, scheduled_at_ms=1_000, at_ms=3_500)
    metrics.record_delivery("queue", 2, scheduled_at_ms=1_000, at_ms=9_000)
    assert sample("schedd_delivery_lag_seconds_count", {"target": "queue"}) == lag + 1
    assert sample("schedd_delivery_lag_seconds_sum", {"target": "queue"}) == lag_sum + 2.5
    assert sample("schedd_retries_total", {"target": "queue"}) == retries + 1


def test_request_latency_is_labelled_by_route_template_never_the_raw_path() -> None:
    async def get_job(request: web.Request) -> web.Response:
        return web.json_response({"id": request.match_info["job_id"]})

    async def run() -> None:
        app = web.Application(middlewares=[metrics_middleware])
        app.router.add_get("/v1/jobs/{job_id}", get_job)
        async with TestClient(TestServer(app)) as client:
            assert (await client.get("/v1/jobs/job_abc123")).status == 200
            assert (await client.get("/v1/nowhere/job_abc123")).status == 404
            assert (await client.request("PROPFIND", "/v1/jobs/x")).status == 405

    labels = {"route": "/v1/jobs/{job_id}", "method": "GET", "status": "200"}
    before = sample("schedd_api_request_seconds_count", labels)
    unmatched = {"route": "(unmatched)", "method": "GET", "status": "404"}
    before_unmatched = sample("schedd_api_request_seconds_count", unmatched)
    asyncio.run(run())
    assert sample("schedd_api_request_seconds_count", labels) == before + 1
    assert sample("schedd_api_request_seconds_count", unmatched) == before_unmatched + 1
    assert sample(
        "schedd_api_request_seconds_count",
        {"route": "(unmatched)", "method": "other", "status": "405"},
    )
    text = metrics.exposition(None).decode()
    assert "job_abc123" not in text and 'method="PROPFIND"' not in text


def test_apply_observes_each_log_entry(apply: Applier) -> None:
    before = sample("schedd_apply_seconds_count")
    apply("register_node", {"node_id": "n1", "api": "a", "raft": "r"})
    assert sample("schedd_apply_seconds_count") == before + 1


def test_read_store_leaves_no_transaction_open(db: Database) -> None:
    conn = connect(db.path, readonly=True)
    try:
        store_gauges.read_store(conn, node_id="n1", partitions=4, now_ms=NOW_MS)
        assert not conn.in_transaction
    finally:
        conn.close()
