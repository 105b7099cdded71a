"""GET /v1/queues on one real node: the age of a queue's oldest message, and the consumers that
received from it (named, or by their address), kept per tenant; /v1/stats?scope=cluster."""

from __future__ import annotations

from typing import Any

from tests.integration.api_helpers import Tenant, create_job, new_tenant
from tests.servers import NodeProcess, http, ms, now_ms, wait_for


def queues(node: NodeProcess, token: str) -> dict[str, Any]:
    status, answer, _ = http("GET", f"{node.url}/v1/queues", token=token)
    assert status == 200, answer
    return {"partial": answer["partial"], **{q["name"]: q for q in answer["queues"]}}


def receive(node: NodeProcess, tenant: Tenant, queue: str, **body: Any) -> tuple[int, Any]:
    status, answer, _ = http(
        "POST", f"{node.url}/v1/queues/{queue}/receive", body, token=tenant.token, timeout_s=30
    )
    return status, answer


def test_oldest_age_counts_ready_and_in_flight_messages_and_is_null_without_any(
    node: NodeProcess,
) -> None:
    tenant = new_tenant(node)
    target = {"type": "queue", "name": "aged"}
    job = create_job(node, tenant.token, {"schedule": {"delay": "0s"}, "target": target})
    scheduled_ms = ms(job["next_run_at"])
    ready = wait_for(lambda: queues(node, tenant.token).get("aged"), 20, "a ready message")
    assert ready["ready"] == 1 and ready["oldest_age_s"] is not None
    assert 0 <= ready["oldest_age_s"] <= (now_ms() - scheduled_ms) / 1000
    status, answer = receive(node, tenant, "aged", wait="5s", visibility_timeout="1m")
    assert status == 200 and len(answer["messages"]) == 1, answer
    in_flight = queues(node, tenant.token)["aged"]
    assert in_flight["in_flight"] == 1 and in_flight["oldest_age_s"] >= ready["oldest_age_s"]
    receipts = [answer["messages"][0]["receipt"]]
    status, _, _ = http(
        "POST", f"{node.url}/v1/queues/aged/ack", {"receipts": receipts}, token=tenant.token
    )
    assert status == 200
    # Empty now; still listed, for the consumer seen receiving from it.
    emptied = queues(node, tenant.token)["aged"]
    assert emptied["ready"] == emptied["in_flight"] == 0 and emptied["oldest_age_s"] is None


def test_consumers_are_named_by_their_field_or_their_address_per_tenant(
    node: NodeProcess,
) -> None:
    tenant, other = new_tenant(node), new_tenant(node)
    before = now_ms() // 1000 * 1000
    assert receive(node, tenant, "named", consumer="worker-1@host.example:42")[0] == 200
    assert receive(node, tenant, "named")[0] == 200
    listed = queues(node, tenant.token)
    assert listed["partial"] is False
    named = listed["named"]
    assert named["ready"] == 0 and named["oldest_age_s"] is None
    assert [(c["consumer"], c["node"]) for c in named["consumers"]] == [
        ("127.0.0.1", "n1"),
        ("worker-1@host.example:42", "n1"),
    ]
    assert all(before <= ms(c["last_seen"]) <= now_ms() for c in named["consumers"])
    assert queues(node, other.token) == {"partial": False}  # another tenant sees none of them

    status, error = receive(node, tenant, "named", consumer="two words")
    assert status == 400 and "consumer" in error["error"]["message"], error
    assert receive(node, tenant, "named", consumer="x" * 129)[0] == 400


def test_the_local_consumers_route_is_the_admins_with_a_tenant(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    assert receive(node, tenant, "local", consumer="w1")[0] == 200
    url = f"{node.url}/v1/queues/consumers/local"
    assert http("GET", url, token=tenant.token)[0] == 403
    assert http("GET", url)[0] == 403  # the admin must name the tenant
    status, answer, _ = http("GET", url, headers={"X-Tenant": tenant.tenant_id})
    assert status == 200, answer
    assert answer["node_id"] == "n1"
    [seen] = answer["consumers"]
    assert (seen["queue"], seen["consumer"], seen["node"]) == ("local", "w1", "n1")


def test_cluster_stats_of_a_single_node_list_it_once(node: NodeProcess) -> None:
    status, answer, _ = http("GET", f"{node.url}/v1/stats?scope=cluster")
    assert status == 200, answer
    assert set(answer) == {"nodes", "interval_s", "window_s"}
    [only] = answer["nodes"]
    assert only["node_id"] == "n1" and only["node"]["role"] == "leader"
    assert isinstance(only["samples"], list)
    status, node_scope, _ = http("GET", f"{node.url}/v1/stats?scope=node")
    assert status == 200 and node_scope["node_id"] == "n1"
    status, error, _ = http("GET", f"{node.url}/v1/stats?scope=everything")
    assert status == 400 and "scope" in error["error"]["message"], error
