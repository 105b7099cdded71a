"""GET /metrics on one real node: the Prometheus text parses, and claims, lags, queue and backlog
gauges, Raft state and request latency by route move as jobs fire and are received and acked."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from schedd.timeformat import format_instant
from tests.integration.api_helpers import Tenant, create_job, new_tenant
from tests.servers import NodeProcess, http, make_nodes, metrics_text, now_ms, running, wait_for

DISPATCH = '[dispatch]\nlease_ttl = "2s"\n'
SLOW_RETRY = {"max_attempts": 2, "backoff": "fixed", "initial_delay": "60s", "max_delay": "60s"}
NO_RETRY = {**SLOW_RETRY, "max_attempts": 1}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    base: Path = tmp_path_factory.mktemp("metrics")
    with running(make_nodes(base, 1, extra_sections=DISPATCH)) as nodes:
        yield nodes[0]


def scrape(node: NodeProcess) -> Samples:
    """Every sample of GET /metrics (with the admin token), by name and labels."""
    text = metrics_text(node.url, timeout_s=15)
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in samples, f"duplicate series {key}"
            samples[key] = s.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def queue_state(node: NodeProcess, queue: str) -> dict[str, float]:
    samples = scrape(node)
    return {
        state: value(samples, "schedd_queue_messages", queue=queue, state=state)
        for state in ("ready", "in_flight", "delayed", "dead")
    }


def queue_job(queue: str, retry: dict[str, Any], **fields: Any) -> dict[str, Any]:
    target = {"type": "queue", "name": queue}
    return {"schedule": {"delay": "0s"}, "target": target, "retry": retry, **fields}


def receive(node: NodeProcess, tenant: Tenant, queue: str, count: int) -> list[dict[str, Any]]:
    body = {"max": count, "wait": "5s", "visibility_timeout": "1m"}
    status, answer, _ = http(
        "POST", f"{node.url}/v1/queues/{queue}/receive", body, token=tenant.token, timeout_s=30
    )
    assert status == 200, answer
    messages: list[dict[str, Any]] = answer["messages"]
    return messages


def settle(node: NodeProcess, tenant: Tenant, queue: str, verb: str, messages: list[Any]) -> None:
    body = {"receipts": [m["receipt"] for m in messages]}
    status, answer, _ = http(
        "POST", f"{node.url}/v1/queues/{queue}/{verb}", body, token=tenant.token
    )
    assert status == 200, answer


def test_raft_gauges_show_a_leader_that_owns_every_partition(node: NodeProcess) -> None:
    samples = wait_for(
        lambda: (s := scrape(node)) and value(s, "schedd_partitions_owned") == 256 and s,
        20,
        "the node to lease all 256 partitions",
    )
    assert value(samples, "schedd_raft_role", role="leader") == 1
    assert value(samples, "schedd_raft_role", role="follower") == 0
    assert value(samples, "schedd_raft_leader_known") == 1
    assert value(samples, "schedd_raft_term") >= 1
    applied = value(samples, "schedd_raft_applied_index")
    assert applied > 0 and value(samples, "schedd_raft_commit_index") >= applied
    assert value(samples, "schedd_apply_seconds_count") > 0
    assert value(samples, "schedd_metrics_store_read_seconds") < 1.0


def test_claims_lags_and_queue_gauges_follow_jobs_through_receive_nack_and_ack(
    node: NodeProcess,
) -> None:
    tenant = new_tenant(node)
    before = scrape(node)
    for _ in range(4):
        create_job(node, tenant.token, queue_job("metq", SLOW_RETRY))
    doomed_id = create_job(node, tenant.token, queue_job("metq", NO_RETRY))["job_id"]
    ready = {"ready": 5, "in_flight": 0, "delayed": 0, "dead": 0}
    wait_for(lambda: queue_state(node, "metq") == ready, 15, "five ready messages")
    after_claim = scrape(node)
    claimed = value(after_claim, "schedd_claims_total", result="claimed")
    assert claimed - value(before, "schedd_claims_total", result="claimed") >= 5
    assert value(after_claim, "schedd_claims_total", result="stale_lease") >= 0  # exported
    lag_count = value(after_claim, "schedd_claim_lag_seconds_count")
    assert lag_count - value(before, "schedd_claim_lag_seconds_count") >= 5
    assert value(after_claim, "schedd_claim_lag_seconds_bucket", le="+Inf") == lag_count

    messages = receive(node, tenant, "metq", 10)
    assert len(messages) == 5
    assert queue_state(node, "metq") == {"ready": 0, "in_flight": 5, "delayed": 0, "dead": 0}
    delivered = scrape(node)
    lag = ("schedd_delivery_lag_seconds_count", "queue")
    assert value(delivered, lag[0], target=lag[1]) - value(before, lag[0], target=lag[1]) == 5
    assert value(delivered, "schedd_delivery_lag_seconds_sum", target="queue") < 60 * 5

    doomed = [m for m in messages if m["job_id"] == doomed_id]
    retried = [m for m in messages if m not in doomed][:2]
    settle(node, tenant, "metq", "nack", [*doomed, *retried])
    settle(node, tenant, "metq", "ack", [m for m in messages if m not in doomed + retried])
    assert queue_state(node, "metq") == {"ready": 0, "in_flight": 0, "delayed": 2, "dead": 1}
    settled = scrape(node)
    nacks = value(settled, "schedd_queue_nacks_total") - value(before, "schedd_queue_nacks_total")
    assert nacks == 3
    assert value(settled, "schedd_deadletters") >= 1


@pytest.mark.slow
def test_due_backlog_grows_while_a_rate_limited_tenant_waits_and_drains(node: NodeProcess) -> None:
    tenant = new_tenant(node, dispatch_rate=1)
    at = format_instant(now_ms() + 7_000)  # the dispatcher reads the new rate within 5 s
    for _ in range(6):
        create_job(node, tenant.token, queue_job("slow", NO_RETRY, schedule={"run_at": at}))
    # A scrape in the very millisecond the runs fall due counts them with an age of 0: wait for
    # a scrape that shows both the backlog and its age (it failed once so, 2026-12-02).
    wait_for(
        lambda: (
            (s := scrape(node))
            and value(s, "schedd_due_backlog") >= 2
            and value(s, "schedd_due_oldest_age_seconds") > 0
        ),
        20,
        "runs waiting for their tenant's rate, with an age",
    )
    wait_for(lambda: value(scrape(node), "schedd_due_backlog") == 0, 20, "the backlog to drain")
    assert value(scrape(node), "schedd_due_oldest_age_seconds") == 0


def test_request_latency_is_labelled_by_route_template_and_status(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token)
    status, _, _ = http("GET", f"{node.url}/v1/jobs/{job['job_id']}", token=tenant.token)
    assert status == 200
    status, _, _ = http("GET", f"{node.url}/v1/jobs/job_{'0' * 24}", token=tenant.token)
    assert status == 404
    samples = scrape(node)
    route = {"route": "/v1/jobs/{job_id}", "method": "GET"}
    assert value(samples, "schedd_api_request_seconds_count", **route, status="200") >= 1
    assert value(samples, "schedd_api_request_seconds_count", **route, status="404") >= 1
    created = {"route": "/v1/jobs", "method": "POST", "status": "201"}
    assert value(samples, "schedd_api_request_seconds_count", **created) >= 1
    routes = {dict(labels).get("route", "") for _, labels in samples}
    assert not any(job["job_id"] in r for r in routes), routes


def test_metrics_keep_the_callback_metric_names(node: NodeProcess) -> None:
    names = {name for name, _ in scrape(node)}
    assert {"schedd_callback_dead_letters_total", "schedd_retries_total"} <= names
    assert {"schedd_snapshot_seconds_count", "schedd_snapshot_failures_total"} <= names


@pytest.mark.slow
def test_long_polls_woken_by_one_message_propose_one_receive_for_it(node: NodeProcess) -> None:
    """Eight long polls on one queue, then one message: one receive command, and none that came
    back empty (before, every woken poll proposed a receive of `max` and seven were empty)."""
    tenant = new_tenant(node)
    before = scrape(node)
    with ThreadPoolExecutor(8) as pool:
        polls = [pool.submit(receive, node, tenant, "herd", 100) for _ in range(8)]
        # due a second after the polls began waiting (each waits up to 5 s)
        create_job(node, tenant.token, queue_job("herd", NO_RETRY, schedule={"delay": "1s"}))
        got = [len(p.result(timeout=30)) for p in polls]
    assert sorted(got) == [0] * 7 + [1]
    after = scrape(node)
    for result, added in (("messages", 1), ("empty", 0)):
        name = "schedd_queue_receives_total"
        assert value(after, name, result=result) - value(before, name, result=result) == added
