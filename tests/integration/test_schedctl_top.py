"""`schedctl top --once` against a real node with a queue that has runs waiting."""

from __future__ import annotations

from tests.integration.test_schedctl import Ctl
from tests.servers import ADMIN_TOKEN, NodeProcess, http, wait_for


def test_top_shows_claims_backlog_queues_and_tenants(node: NodeProcess) -> None:
    admin = Ctl(node.url, ADMIN_TOKEN)
    ctl = admin.new_tenant()
    for _ in range(3):
        assert ctl("add", "--in", "0s", "--queue", "top-q").returncode == 0

    def queued() -> bool | None:
        status, answer, _ = http("GET", f"{node.url}/v1/queues", token=ctl.token)
        ready = [q["ready"] for q in answer["queues"] if q["name"] == "top-q"]
        return True if status == 200 and ready == [3] else None

    wait_for(queued, 20, "three ready messages")
    result = admin("top", "--once", "--interval", "0.5")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "leader n1" in out and "nodes 1/1 healthy" in out and "runs claimed/s" in out
    [row] = [line for line in out.splitlines() if "top-q" in line]
    assert row.split("│")[2].strip() == "3"  # ready
    assert "active jobs" in out
    tenant_only = ctl("top", "--once", "--interval", "0.5")
    assert tenant_only.returncode == 1 and "admin token" in tenant_only.stderr
