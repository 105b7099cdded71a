"""A job's versions on three real nodes (issue 31): changes proposed through a follower are
recorded through the log, every replica answers the same history and digests alike; PUTs of one
key through every node at once make one job (issue 32); a calendar changed through a follower
fences its jobs' claims, every replica alike, and every node forecasts the same load (issue 33)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.test_replication import JOB, leader_of, tenant_token, wait_converged
from tests.servers import NodeProcess, http, make_nodes, running, wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    with running(make_nodes(tmp_path_factory.mktemp("versions"), 3)) as started:
        yield started


def stored_rows(node: NodeProcess, job_id: str) -> int:
    conn = sqlite3.connect(f"file:{Path(node.data_dir) / 'state.db'}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT COUNT(*) FROM job_versions WHERE job_id = ?", (job_id,))
        return int(row.fetchone()[0])
    finally:
        conn.close()


def change(node: NodeProcess, token: str, method: str, path: str, body: Any = None) -> None:
    status, answer, _ = http(method, f"{node.url}{path}", body, token=token)
    assert status in (200, 204), answer


def versions(node: NodeProcess, token: str, job_id: str) -> list[dict[str, Any]]:
    status, page, _ = http("GET", f"{node.url}/v1/jobs/{job_id}/versions", token=token)
    assert status == 200, page
    found: list[dict[str, Any]] = page["versions"]
    return found


def test_changes_through_a_follower_are_versions_on_every_replica(
    nodes: list[NodeProcess],
) -> None:
    follower = next(n for n in nodes if n is not leader_of(nodes))
    token = tenant_token(follower, "versions")
    status, probe, _ = http("POST", f"{follower.url}/v1/jobs", JOB, token=token)
    assert status == 201, probe

    def recorded() -> bool:
        """Once the follower has heard every member's log level, its changes are versioned."""
        change(follower, token, "POST", f"/v1/jobs/{probe['job_id']}/pause")
        change(follower, token, "POST", f"/v1/jobs/{probe['job_id']}/resume")
        return stored_rows(follower, probe["job_id"]) > 0

    wait_for(recorded, 30, "a versioned change (every member heard at log level 8)")

    status, job, _ = http("POST", f"{follower.url}/v1/jobs", JOB | {"name": "a"}, token=token)
    assert status == 201, job
    path = f"/v1/jobs/{job['job_id']}"
    change(follower, token, "PATCH", path, {"name": "b", "payload": {"n": 2}})
    change(follower, token, "PATCH", path, {"schedule": {"delay": "2h"}})
    change(follower, token, "POST", f"{path}/pause")
    change(follower, token, "DELETE", path)
    wait_converged(nodes)
    answers = [versions(node, token, job["job_id"]) for node in nodes]
    assert answers[0] == answers[1] == answers[2]
    assert [v["change"] for v in answers[0]] == [
        "cancel",
        "pause",
        "reschedule",
        "update",
        "create",
    ]
    assert answers[0][3]["spec"]["payload"] == {"n": 2} and answers[0][4]["spec"]["name"] == "a"
    assert [stored_rows(node, job["job_id"]) for node in nodes] == [5, 5, 5]


def test_puts_of_one_key_through_every_node_at_once_make_one_job(nodes: list[NodeProcess]) -> None:
    """Issue 32: each node proposes its own create; apply takes the first, refuses the others
    (the key is taken), and they answer the job the first made, on every replica alike."""
    token = tenant_token(nodes[0], "keys")
    # A cron schedule: a delay would be a new run_at, so a change, at every PUT.
    body = JOB | {"schedule": {"cron": "0 3 * * *"}, "labels": {"team": "a"}}

    def level_9() -> bool:  # every member heard at log level 9 by every node
        return all(
            http("PUT", f"{node.url}/v1/jobs/by-key/probe-{k}", body, token=token)[0] == 201
            for k, node in enumerate(nodes)
        )

    wait_for(level_9, 30, "every node accepting keys (log level 9)")
    with ThreadPoolExecutor(9) as pool:
        answers = list(
            pool.map(
                lambda node: http("PUT", f"{node.url}/v1/jobs/by-key/race", body, token=token),
                nodes * 3,
            )
        )
    assert sorted(status for status, _, _ in answers) == [200] * 8 + [201], answers
    assert len({answer["job_id"] for _, answer, _ in answers}) == 1
    assert sum(answer["changed"] for _, answer, _ in answers) == 1
    wait_converged(nodes)
    for node in nodes:
        status, page, _ = http("GET", f"{node.url}/v1/jobs?label=team=a", token=token)
        assert status == 200 and len(page["jobs"]) == 4, page  # the three probes and the race


def test_a_calendar_changed_through_a_follower_fences_the_claims_of_its_jobs(
    nodes: list[NodeProcess],
) -> None:
    """Issue 33: a calendar holding today, made and changed through a follower, skips a job's
    runs on every replica alike (reason calendar:NAME) until the change; then runs resume."""
    follower = next(n for n in nodes if n is not leader_of(nodes))
    token = tenant_token(follower, "calendars")
    today = time.strftime("%Y-%m-%d", time.gmtime())
    tomorrow = time.strftime("%Y-%m-%d", time.gmtime(time.time() + 86_400))
    hols = {"name": "hols", "dates": [today, tomorrow]}

    def made() -> bool:  # once the follower has heard every member at log level 10
        return http("POST", f"{follower.url}/v1/calendars", hols, token=token)[0] == 201

    wait_for(made, 30, "a calendar created (every member heard at log level 10)")
    body = JOB | {"schedule": {"every": "1s", "exclude": ["hols"]}}
    status, job, _ = http("POST", f"{follower.url}/v1/jobs", body, token=token)
    assert status == 201, job
    runs_url = f"{follower.url}/v1/jobs/{job['job_id']}/runs?limit=100"

    def runs() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = http("GET", runs_url, token=token)[1]["runs"]
        return found

    wait_for(lambda: len(runs()) >= 3, 20, "three runs skipped by the calendar")
    assert {(r["status"], r["error"]) for r in runs()} == {("skipped", "calendar:hols")}
    status, saved, _ = http(
        "PUT", f"{follower.url}/v1/calendars/hols", {"dates": ["2030-01-01"]}, token=token
    )
    assert status == 200 and saved["used_by"] == 1, saved
    wait_for(lambda: any(r["status"] != "skipped" for r in runs()), 20, "a run after the change")
    change(follower, token, "DELETE", f"/v1/jobs/{job['job_id']}")
    wait_converged(nodes)
    answers = [http("GET", runs_url.replace(follower.url, n.url), token=token)[1] for n in nodes]
    assert answers[0] == answers[1] == answers[2]


def test_every_node_forecasts_the_same_load_ahead(nodes: list[NodeProcess]) -> None:
    """Issue 33 §3: a forecast is read from each node's replica: once they converge, the three
    nodes answer the same steps and peak (the hourly jobs made through the leader)."""
    leader = leader_of(nodes)
    token = tenant_token(leader, "forecast")
    for minute in (0, 0, 0, 30):
        body = JOB | {"schedule": {"cron": f"{minute} * * * *"}}
        assert http("POST", f"{leader.url}/v1/jobs", body, token=token)[0] == 201
    wait_converged(nodes)
    start = time.strftime("%Y-%m-%dT%H:00:00Z", time.gmtime(time.time() + 3_600))
    query = f"/v1/forecast?from={start}&step=30m&to={start.replace(':00:00Z', ':59:59Z')}"
    answers = [http("GET", f"{n.url}{query}", token=token)[1] for n in nodes]
    assert answers[0] == answers[1] == answers[2], answers
    assert [s["runs"] for s in answers[0]["steps"]] == [3, 1]
    assert answers[0]["peak"] == {"at": start, "runs": 3}
