"""After the faults are healed: wait until the runs stop changing, then read every node's jobs,
runs and audit trail over the API, and catch the replicas' state digests at one index."""

from __future__ import annotations

import re
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schedd.timeformat import parse_instant
from tests.chaos.client import read_json
from tests.chaos.workload import Tenant
from tests.servers import ADMIN_TOKEN

# schedd/raft/replica.py logs this once per term a node leads (on its tick thread).
LEADER_LINE = re.compile(r"raft leader term=(\d+)")
TERMINAL = frozenset({"succeeded", "dead", "skipped"})
PAGE = 1000


@dataclass(slots=True)
class NodeView:
    """One node's answers: job_id -> job, job_id -> runs (oldest first), the audit trail."""

    node_id: str
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    audit: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _pages(url: str, path: str, key: str, token: str) -> list[dict[str, Any]] | None:
    items: list[dict[str, Any]] = []
    cursor = ""
    while True:
        sep = "&" if "?" in path else "?"
        page = read_json(url, f"{path}{sep}limit={PAGE}&cursor={cursor}", token=token)
        if not isinstance(page, dict):
            return None
        items += page[key]
        if page.get("next_cursor") is None:
            return items
        cursor = page["next_cursor"]


def read_jobs(url: str, tenants: list[Tenant], status: str | None = None) -> dict[str, Any] | None:
    """job_id -> job of every tenant (None when a read failed)."""
    jobs: dict[str, Any] = {}
    for tenant in tenants:
        path = "/v1/jobs" + (f"?status={status}" if status else "")
        listed = _pages(url, path, "jobs", tenant.token)
        if listed is None:
            return None
        jobs |= {job["job_id"]: job | {"_tenant": tenant.name} for job in listed}
    return jobs


def _with_ms(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Epoch ms beside each instant of a run (the checker computes with them)."""
    for run in runs:
        for key in ("scheduled_at", "fire_at", "dispatched_at", "finished_at"):
            value = run.get(key)
            run[f"{key}_ms"] = None if value is None else parse_instant(value, field=key)
        for attempt in run.get("attempts", []):
            attempt["started_at_ms"] = parse_instant(attempt["started_at"], field="started_at")
    return runs


def read_view(node_id: str, url: str, tenants: list[Tenant]) -> NodeView:
    view = NodeView(node_id)
    tokens = {t.name: t.token for t in tenants}
    jobs = read_jobs(url, tenants)
    if jobs is None:
        view.errors.append("jobs unreadable")
        return view
    view.jobs = jobs
    runs = read_runs_ms(url, jobs, tokens)
    if runs is None:
        view.errors.append("runs unreadable")
    else:
        view.runs = runs
    audit = _pages(url, "/v1/audit", "audit", ADMIN_TOKEN)
    if audit is None:
        view.errors.append("audit unreadable")
    else:
        view.audit = audit
    return view


def read_runs_ms(
    url: str, jobs: dict[str, Any], tokens: dict[str, str]
) -> dict[str, list[dict[str, Any]]] | None:
    def one(job_id: str) -> list[dict[str, Any]] | None:
        runs = _pages(
            url, f"/v1/jobs/{job_id}/runs?outputs=true", "runs", tokens[jobs[job_id]["_tenant"]]
        )
        return None if runs is None else sorted(_with_ms(runs), key=lambda r: r["scheduled_at_ms"])

    with ThreadPoolExecutor(6) as pool:
        answers = dict(zip(jobs, pool.map(one, jobs), strict=True))
    if any(v is None for v in answers.values()):
        return None
    return {k: v for k, v in answers.items() if v is not None}


def fingerprint(runs: dict[str, list[dict[str, Any]]]) -> tuple[Any, ...]:
    return tuple(
        (job_id, r["scheduled_at"], r["status"], r["attempt"])
        for job_id in sorted(runs)
        for r in runs[job_id]
    )


def wait_quiet(url: str, tenants: list[Tenant], timeout_s: float) -> tuple[float | None, list[str]]:
    """Until no job is active (but those that run after another) and every run is finished
    and unchanged over two reads two seconds apart (a job the workload paused may stay
    paused). Returns (seconds waited or None, what was still moving at the end)."""
    start = time.monotonic()
    tokens = {t.name: t.token for t in tenants}
    last: tuple[Any, ...] | None = None
    moving: list[str] = ["nothing read yet"]
    while time.monotonic() - start < timeout_s:
        jobs = read_jobs(url, tenants)
        runs = None if jobs is None else read_runs_ms(url, jobs, tokens)
        if jobs is None or runs is None:
            moving = ["reads failed"]
            time.sleep(1.0)
            continue
        # A job that runs after another stays active, with no times of its own: its runs are
        # added as its upstream's end (and then show, or are claimed, like any run).
        live = [
            j
            for j, job in jobs.items()
            if job["status"] == "active" and "after" not in job["schedule"]
        ]
        open_runs = [
            f"{j}@{r['scheduled_at']}:{r['status']}"
            for j, rs in runs.items()
            for r in rs
            if r["status"] not in TERMINAL
        ]
        moving = [f"job {j} {jobs[j]['status']}" for j in live] + open_runs
        now_print = fingerprint(runs)
        if not moving and now_print == last:
            return time.monotonic() - start, []
        last = now_print if not moving else None
        time.sleep(2.0)
    return None, moving[:50]


def catch_digests(urls: dict[str, str], timeout_s: float = 20.0) -> dict[str, Any]:
    """Read /v1/admin/state on all nodes at once until all are at one applied index (heartbeats
    keep the index moving). Returns every sample whose indexes matched, and whether all did."""
    deadline = time.monotonic() + timeout_s
    same_index: dict[int, dict[str, str]] = defaultdict(dict)
    last: list[Any] = []
    with ThreadPoolExecutor(len(urls)) as pool:
        while time.monotonic() < deadline:
            ids = sorted(urls)
            states = list(
                pool.map(lambda n: read_json(urls[n], "/v1/admin/state", token=ADMIN_TOKEN), ids)
            )
            last = states
            for node_id, state in zip(ids, states, strict=True):
                if isinstance(state, dict):
                    same_index[state["applied_index"]][node_id] = state["digest"]
            indexes = {s["applied_index"] for s in states if isinstance(s, dict)}
            if len(indexes) == 1 and all(isinstance(s, dict) for s in states):
                break
            time.sleep(0.02)
    shared = {i: d for i, d in same_index.items() if len(d) > 1}
    caught = any(len(d) == len(urls) for d in shared.values())
    return {"caught_all_at_one_index": caught, "shared": shared, "last": last}


def leader_terms(logs: dict[str, Path]) -> dict[str, list[int]]:
    """node_id -> every term the node's log says it led, in order (its log runs on across
    restarts and wipes: the wiped node's terms before and after are all there)."""
    terms: dict[str, list[int]] = {}
    for node_id, path in logs.items():
        text = path.read_text(errors="replace") if path.exists() else ""
        terms[node_id] = [int(m.group(1)) for m in LEADER_LINE.finditer(text)]
    return terms
