"""`schedctl top --once` against a real node with a queue that has runs waiting."""

from __future__ import annotations

import json

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
    lines = result.stdout.splitlines()  # piped: plain aligned columns, no box characters
    assert lines[:2] == ["leader           n1", "nodes healthy    1/1"]
    assert lines[2].startswith("runs claimed/s ")
    assert not any(box in result.stdout for box in "│┃━─")
    header = next(line for line in lines if line.startswith("QUEUE"))
    assert header.split() == ["QUEUE", "READY", "IN", "FLIGHT", "DELAYED", "DEAD"]
    [row] = [line for line in lines if line.startswith("top-q")]
    assert row.split() == ["top-q", "3", "0", "0", "0"]  # ready, in flight, delayed, dead
    assert row.index("3") == header.index("READY")  # aligned under its header
    assert any(line.startswith("TENANT ") and "ACTIVE JOBS" in line for line in lines)
    as_json = admin("top", "--once", "--interval", "0.5", "--json")
    assert as_json.returncode == 0, as_json.stderr
    figures = json.loads(as_json.stdout)
    assert figures["leader"] == "n1" and figures["nodes_healthy"] == "1/1"
    assert {"queue": "top-q", "ready": "3", "in_flight": "0", "delayed": "0", "dead": "0"} in (
        figures["queues"]
    )
    live_json = admin("top", "--json")
    assert live_json.returncode == 2 and "--once" in live_json.stderr
    tenant_only = ctl("top", "--once", "--interval", "0.5")
    assert tenant_only.returncode == 1 and "admin token" in tenant_only.stderr
