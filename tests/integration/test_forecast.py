"""GET /v1/forecast and `schedctl forecast` against one real node: a tenant's runs per step
(an every job, a cron job in a half-hour zone, a one-time job), the peak, the admin's cluster
view with its tenants, bounds refused naming the field, and the terminal's bars."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from schedd.timeformat import format_instant
from tests.integration.api_helpers import Tenant, assert_error, create_job, new_tenant
from tests.integration.test_schedctl import Ctl, assert_fails
from tests.servers import NodeProcess, http, metrics_text, now_ms, wait_for

MIN = 60_000
HOUR = 60 * MIN
QUEUE = {"type": "queue", "name": "forecast"}
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Every 10 minutes from T0; 0 * * * * in Asia/Kolkata (+05:30) fires at :30 UTC; one run at
# T0 + 25m: 10-minute steps of [T0, T0 + 2h).
EXPECTED_RUNS = [1, 1, 2, 2, 1, 1, 1, 1, 1, 2, 1, 1]


@pytest.fixture(scope="module")
def planned(node: NodeProcess) -> tuple[Tenant, int]:
    tenant = new_tenant(node)
    t0 = (now_ms() // HOUR + 26) * HOUR
    for schedule in (
        {"every": "10m", "start_at": format_instant(t0)},
        {"cron": "0 * * * *", "timezone": "Asia/Kolkata"},
        {"run_at": format_instant(t0 + 25 * MIN)},
    ):
        create_job(node, tenant.token, {"schedule": schedule, "target": QUEUE})
    return tenant, t0


def forecast(node: NodeProcess, query: str, **options: Any) -> tuple[int, Any]:
    status, answer, _ = http("GET", f"{node.url}/v1/forecast?{query}", **options)
    return status, answer


def span(t0: int, step: str = "10m") -> str:
    return f"from={format_instant(t0)}&to={format_instant(t0 + 2 * HOUR)}&step={step}"


def test_a_tenant_sees_its_runs_per_step_and_the_peak(
    node: NodeProcess, planned: tuple[Tenant, int]
) -> None:
    tenant, t0 = planned
    status, answer = forecast(node, span(t0), token=tenant.token)
    assert status == 200, answer
    assert [step["at"] for step in answer["steps"]] == [
        format_instant(t0 + k * 10 * MIN) for k in range(12)
    ]
    assert [step["runs"] for step in answer["steps"]] == EXPECTED_RUNS
    assert answer["peak"] == {"at": format_instant(t0 + 20 * MIN), "runs": 2}
    assert (answer["jobs"], answer["partial"], answer["step_s"]) == (3, False, 600.0)
    assert "tenants" not in answer


def test_the_admin_sees_the_cluster_and_its_tenants_or_one_tenant(
    node: NodeProcess, planned: tuple[Tenant, int]
) -> None:
    tenant, t0 = planned
    status, whole = forecast(node, span(t0))
    assert status == 200, whole
    mine = [t for t in whole["tenants"] if t["tenant_id"] == tenant.tenant_id]
    peak = {"at": format_instant(t0 + 20 * MIN), "runs": 2}
    assert mine == [{"tenant_id": tenant.tenant_id, "runs": 15, "peak": peak}]
    totals = [step["runs"] for step in whole["steps"]]
    assert all(total >= own for total, own in zip(totals, EXPECTED_RUNS, strict=True))
    status, one = forecast(node, span(t0), headers={"X-Tenant": tenant.tenant_id})
    assert status == 200, one
    assert [step["runs"] for step in one["steps"]] == EXPECTED_RUNS
    assert "tenants" not in one


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("step=2h", "step"),
        ("step=0s", "step"),
        ("from=2026-01-01T00:00:00Z&to=2026-01-01T03:00:00Z&step=1s", "step"),
        ("from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", "to"),
        ("from=tomorrow", "from"),
    ],
)
def test_a_span_out_of_bounds_is_a_400_naming_the_field(
    node: NodeProcess, planned: tuple[Tenant, int], query: str, field: str
) -> None:
    tenant, _ = planned
    status, answer, _ = http("GET", f"{node.url}/v1/forecast?{query}", token=tenant.token)
    assert_error(status, answer, 400, "invalid_request")
    assert answer["error"]["message"].startswith(f"{field}:"), answer


def test_schedctl_draws_a_bar_per_step_and_names_the_peak(
    node: NodeProcess, planned: tuple[Tenant, int]
) -> None:
    tenant, t0 = planned
    ctl = Ctl(node.url, tenant.token)
    args = ("forecast", "--from", format_instant(t0), "--hours", "2", "--step", "10m")
    answer = ctl.json(*args)
    assert [step["runs"] for step in answer["steps"]] == EXPECTED_RUNS
    result = ctl(*args)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 13, result.stdout
    peak_line = lines[2]
    assert peak_line.endswith("2  ◀ peak") and "█" * 40 in peak_line, peak_line
    assert lines[0].startswith(format_instant(t0)[:10]) and "█" * 20 in lines[0], lines[0]
    assert lines[-1].startswith(f"peak: 2 runs in the step from {format_instant(t0 + 20 * MIN)}")
    assert_fails(ctl("forecast", "--step", "2h"), 2, "step: must be from 1s to 1h")


def test_the_docs_commands_run(node: NodeProcess) -> None:
    page = (ROOT / "docs" / "forecast.md").read_text()
    scripts = re.findall(r"^```sh\n(.*?)^```", page, re.S | re.M)
    assert len(scripts) == 1
    tenant = new_tenant(node)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_")}
    env |= {
        "PATH": f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}",
        "SCHEDCTL_URL": node.url,
        "SCHEDCTL_TOKEN": tenant.token,
    }
    result = subprocess.run(
        ["bash", "-c", "set -eo pipefail\n" + scripts[0]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "◀ peak" in result.stdout and '"peak": {' in result.stdout, result.stdout


def test_the_leader_exports_the_next_hours_peak_second(
    node: NodeProcess, planned: tuple[Tenant, int]
) -> None:
    def peak() -> float | None:
        text = metrics_text(node.url)
        found = re.search(r"^schedd_forecast_peak_runs (\S+)$", text, re.M)
        assert found and "schedd_drain_capacity_runs_per_second" in text, text
        value = float(found.group(1))
        return None if math.isnan(value) else value

    # every job of this module runs at most once in any second of the next hour
    assert wait_for(peak, 15, "the leader's first forecast pass") >= 1
    text = metrics_text(node.url)
    assert re.search(r"^schedd_forecast_overload_seconds NaN$", text, re.M), text


def test_runs_on_an_excluded_calendars_dates_are_not_ahead(
    node: NodeProcess, planned: tuple[Tenant, int]
) -> None:
    _, t0 = planned
    tenant = new_tenant(node)
    days = sorted({format_instant(t0)[:10], format_instant(t0 + 2 * HOUR)[:10]})
    status, answer, _ = http(
        "POST", f"{node.url}/v1/calendars", {"name": "hols", "dates": days}, token=tenant.token
    )
    assert status == 201, answer
    for exclude in (["hols"], None):
        schedule: dict[str, Any] = {"every": "10m", "start_at": format_instant(t0)}
        if exclude:
            schedule["exclude"] = exclude
        create_job(node, tenant.token, {"schedule": schedule, "target": QUEUE})
    status, answer = forecast(node, span(t0), token=tenant.token)
    assert status == 200, answer
    assert [step["runs"] for step in answer["steps"]] == [1] * 12  # the job without exclude
    assert answer["jobs"] == 2
