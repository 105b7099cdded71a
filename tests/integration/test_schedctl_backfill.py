"""`schedctl backfill` against one real node: the count, the dry run (from the preview, nothing
written), --json shapes and exit codes."""

from __future__ import annotations

from typing import Any

import pytest

from schedd.timeformat import format_instant
from tests.integration.test_schedctl import Ctl, assert_fails
from tests.servers import ADMIN_TOKEN, NodeProcess, http, now_ms

MIN = 60_000


@pytest.fixture(scope="module")
def ctl(node: NodeProcess) -> Ctl:
    return Ctl(node.url, ADMIN_TOKEN).new_tenant()


def minutely(ctl: Ctl, start_ms: int) -> dict[str, Any]:
    job: dict[str, Any] = ctl.json(
        "add", "--every", "1m", "--start", format_instant(start_ms), "--queue", "cli-backfill"
    )
    return job


def runs_of(ctl: Ctl, job_id: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = ctl.json("runs", job_id, "--all")["runs"]
    return runs


def test_a_dry_run_counts_from_the_preview_and_writes_nothing(ctl: Ctl) -> None:
    start = (now_ms() // MIN - 3_000) * MIN
    job = minutely(ctl, start)
    # 2,500 slots: the preview is read page by page (1,000 a page).
    frm, to = format_instant(start), format_instant(start + 2_500 * MIN)
    answer = ctl.json("backfill", job["job_id"], "--from", frm, "--to", to, "--dry-run")
    assert answer == {
        "runs": 2_500,
        "first": frm,
        "last": format_instant(start + 2_499 * MIN),
    }
    table = ctl("backfill", job["job_id"], "--from", frm, "--to", to, "--dry-run")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines() == [
        f"{job['job_id']}: 2500 occurrences in the range",
        f"first {frm}",
        f"last  {format_instant(start + 2_499 * MIN)}",
    ]
    assert "nothing was written" in table.stderr
    assert runs_of(ctl, job["job_id"]) == []
    audit = http("GET", f"{ctl.url}/v1/audit?job_id={job['job_id']}", token=ctl.token)[1]
    assert [r["action"] for r in audit["audit"]] == ["create_jobs"]


def test_a_backfill_prints_the_runs_it_added(ctl: Ctl) -> None:
    start = (now_ms() // MIN - 60) * MIN
    job = minutely(ctl, start)
    frm, to = format_instant(start), format_instant(start + 10 * MIN)
    assert ctl.json("backfill", job["job_id"], "--from", frm, "--to", to) == {"runs": 10}
    again = ctl("backfill", job["job_id"], "--from", frm, "--to", to)
    assert (again.returncode, again.stdout) == (0, f"{job['job_id']}: 0 runs backfilled\n")


def test_bad_input_exits_2_and_a_missing_job_1(ctl: Ctl) -> None:
    job = minutely(ctl, now_ms() - 60 * MIN)
    past, later = format_instant(now_ms() - 30 * MIN), format_instant(now_ms() - 20 * MIN)
    assert_fails(ctl("backfill", job["job_id"], "--from", later, "--to", past), 2, "--from")
    assert_fails(
        ctl("backfill", job["job_id"], "--from", "2026-01-01T00:00:00", "--to", past), 2, "--from"
    )
    future = format_instant(now_ms() + 3_600_000)
    assert_fails(ctl("backfill", job["job_id"], "--from", past, "--to", future), 2, "to: ")
    assert_fails(
        ctl("backfill", job["job_id"], "--from", past, "--to", future, "--dry-run"), 2, "--to"
    )
    missing = "job_" + "0" * 24
    assert_fails(ctl("backfill", missing, "--from", past, "--to", later), 1, missing)
    assert_fails(ctl("backfill", missing, "--from", past, "--to", later, "--dry-run"), 1)
