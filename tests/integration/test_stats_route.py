"""GET /v1/stats in process: admin only; this node's Raft figures and its sample ring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient

from schedd.api.stats import STATS, Counters
from tests.integration.test_console_static import ADMIN, serve


class FakeRaft:
    def status(self) -> dict[str, Any]:
        return {"role": "leader", "term": 4, "applied_index": 40}

    def commit_view(self) -> tuple[int, int, bool]:
        return (42, 40, True)

    def clock_problem(self) -> str | None:
        return None

    def is_ready(self) -> bool:
        return True


def test_stats_answers_the_admin_with_the_node_and_its_samples(tmp_path: Path) -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        ring = client.server.app[STATS]
        zero = Counters(claimed=0, deliveries={"queue": 0}, lag_buckets=[(float("inf"), 0)])
        ring.tick(0, 0.0, zero, 0)
        ring.tick(5_000, 5.0, Counters(claimed=10, deliveries={"queue": 5}, lag_buckets=[]), 9)
        response = await client.get("/v1/stats", headers={"Authorization": f"Bearer {ADMIN}"})
        assert response.status == 200
        body = await response.json()
        assert body["node_id"] == "n1" and body["interval_s"] == 5 and body["window_s"] == 900
        assert body["node"] == {
            "role": "leader",
            "term": 4,
            "applied_index": 40,
            "commit_index": 42,
            "lag": 2,
            "partitions": 0,
            "clock_trusted": True,
            "ready": True,
        }
        (sample,) = body["samples"]
        assert sample["claims_per_s"] == 2.0 and sample["backlog"] == 9
        assert sample["deliveries_per_s"] == {"queue": 1.0}
        assert (await client.get("/v1/stats")).status == 401

    serve(tmp_path, scenario, raft=FakeRaft())
