"""GET /v1/alerts in process: a tenant's failure alerts newest first, with their delivery and
body, paged by cursor, and never another tenant's; `schedctl alerts` shows them."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient

from schedd.api.context import token_hash
from schedd.store import alerts
from schedd.store.db import Database
from schedd.timeformat import format_instant
from tests.integration.test_stats_route import serve_with_peers
from tests.schedctl_inprocess import run_schedctl

T1, T2 = "tenant-token", "other-token"
AT_MS = 1_796_412_068_000


async def no_peer(request: web.Request) -> web.StreamResponse:
    raise AssertionError("no peer is asked")


def store_alerts(path: Path) -> list[int]:
    """Three alerts of t1 (two queued at the same instant) and one of t2, before the node."""
    db = Database(path / "state.db")
    try:
        with db.transaction(applied_index=0) as tx:
            tx.execute(
                "INSERT INTO tenants (tenant_id, name, token_hash, signing_secret,"
                " max_active_jobs, dispatch_rate, allowed_hosts, created_at_ms, updated_at_ms)"
                " VALUES ('t2', 't2', ?, 's', 10, 10, '[]', 0, 0)",
                (token_hash(T2),),
            )
            ids = [
                alerts.add(
                    tx,
                    tenant_id=tenant,
                    job_id=f"job_{n}",
                    url="https://hooks.example/a",
                    body=json.dumps({"job_id": f"job_{n}", "n": n}),
                    at_ms=at_ms,
                )
                for n, (tenant, at_ms) in enumerate(
                    [("t1", AT_MS), ("t1", AT_MS + 5), ("t1", AT_MS + 5), ("t2", AT_MS + 9)]
                )
            ]
            tx.execute(
                "UPDATE alerts SET attempts = 2, next_at_ms = NULL, sent_at_ms = ?, "
                "last_error = 'http 503' WHERE alert_id = ?",
                (AT_MS + 7_000, ids[0]),
            )
        return ids
    finally:
        db.close()


async def get(client: TestClient[Any, Any], token: str, query: str = "") -> dict[str, Any]:
    response = await client.get(f"/v1/alerts{query}", headers={"Authorization": f"Bearer {token}"})
    answer: dict[str, Any] = await response.json()
    assert response.status == 200, answer
    return answer


def test_a_tenant_lists_its_alerts_newest_first_in_pages(tmp_path: Path) -> None:
    first, second, third, other = store_alerts(tmp_path)

    async def scenario(client: TestClient[Any, Any], asked: Counter[str]) -> None:
        whole = await get(client, T1)
        assert [a["alert_id"] for a in whole["alerts"]] == [third, second, first]
        assert whole["next_cursor"] is None
        assert whole["alerts"][2] == {
            "alert_id": first,
            "job_id": "job_0",
            "url": "https://hooks.example/a",
            "created_at": format_instant(AT_MS),
            "attempts": 2,
            "sent_at": format_instant(AT_MS + 7_000),
            "next_at": None,
            "last_error": "http 503",
            "body": {"job_id": "job_0", "n": 0},
        }
        pending = whole["alerts"][0]
        assert (pending["attempts"], pending["next_at"]) == (0, format_instant(AT_MS + 5))
        # Pages of one, across two alerts queued at the same instant.
        seen, cursor = [], ""
        while True:
            page = await get(client, T1, f"?limit=1&cursor={cursor}")
            seen += [a["alert_id"] for a in page["alerts"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == [third, second, first]
        theirs = await get(client, T2)
        assert [a["alert_id"] for a in theirs["alerts"]] == [other]
        bad = await client.get(
            "/v1/alerts?cursor=bm9wZQ", headers={"Authorization": f"Bearer {T1}"}
        )
        assert bad.status == 400 and "cursor" in (await bad.json())["error"]["message"]

    serve_with_peers(tmp_path, no_peer, scenario, tenant_token=T1)


def test_schedctl_alerts_shows_each_alerts_state(tmp_path: Path) -> None:
    first, second, third, _ = store_alerts(tmp_path)

    async def scenario(client: TestClient[Any, Any], asked: Counter[str]) -> None:
        env = {"COLUMNS": "200", "SCHEDCTL_URL": str(client.make_url("")).rstrip("/")}
        args = ["alerts", "--token", T1]
        table = await asyncio.to_thread(run_schedctl, args, env=env)
        assert table.returncode == 0, table.stderr
        lines = table.stdout.splitlines()
        assert lines[0].split()[:5] == ["ALERT", "JOB", "CREATED", "AT", "(UTC)"]
        cells = [line.split() for line in lines[1:]]
        assert [(c[0], c[1], c[3], c[4]) for c in cells] == [
            (str(third), "job_2", "pending", "0"),
            (str(second), "job_1", "pending", "0"),
            (str(first), "job_0", "sent", "2"),
        ]
        assert cells[2][-2:] == ["http", "503"]
        paged = await asyncio.to_thread(run_schedctl, [*args, "--limit", "2", "--json"], env=env)
        answer = json.loads(paged.stdout)
        assert [a["alert_id"] for a in answer["alerts"]] == [third, second]
        assert answer["next_cursor"]

    serve_with_peers(tmp_path, no_peer, scenario, tenant_token=T1)
