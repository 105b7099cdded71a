"""Determinism: the same command sequence gives the same digest on fresh stores and on replay."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedd.store.apply import StateMachine
from schedd.store.command import Command, encode
from schedd.store.db import Database
from schedd.store.digest import state_digest

TENANTS = ["t1", "t2"]
JOBS = [f"job_{i}" for i in range(6)]
SPEC = {"schedule": {"run_at": "2026-10-01T00:00:00Z"}, "target": {"type": "queue", "name": "q"}}
times = st.integers(min_value=1_790_000_000_000, max_value=1_790_100_000_000)
tenant_ids = st.sampled_from(TENANTS)
job_ids = st.sampled_from(JOBS)

create_tenant = st.builds(
    lambda t, limit: (
        "create_tenant",
        {
            "tenant_id": t,
            "name": t,
            "token_hash": f"h{t}",
            "signing_secret": "s",
            "max_active_jobs": limit,
            "dispatch_rate": 10,
            "allowed_hosts": [],
        },
    ),
    tenant_ids,
    st.integers(0, 4),
)
create_jobs = st.builds(
    lambda t, items: ("create_jobs", {"tenant_id": t, "actor": "x", "jobs": items}),
    tenant_ids,
    st.lists(
        st.builds(
            lambda j, run, key: {
                "job_id": j,
                "partition": len(j) % 4,
                "spec": SPEC,
                "next_run_at_ms": run,
                "next_fire_at_ms": run,
                "idempotency_key": key,
                "request_hash": None if key is None else "h",
            },
            job_ids,
            times,
            st.sampled_from([None, "k1", "k2"]),
        ),
        min_size=1,
        max_size=3,
    ),
)
job_command = st.builds(
    lambda kind, t, j, v, run: (
        kind,
        {
            "tenant_id": t,
            "job_id": j,
            "expected_version": v,
            "next_run_at_ms": run,
            "next_fire_at_ms": run + 7,
            "scheduled_at_ms": run,
            "spec": SPEC,
        },
    ),
    st.sampled_from(["cancel_job", "pause_job", "resume_job", "update_job", "trigger_job"]),
    tenant_ids,
    job_ids,
    st.integers(1, 4),
    times,
)
backfill_job = st.builds(
    lambda t, j, slots, per_s: (
        "backfill_job",
        {"tenant_id": t, "job_id": j, "slots": sorted(set(slots)), "per_s": per_s},
    ),
    tenant_ids,
    job_ids,
    st.lists(times, max_size=6),
    st.integers(1, 3_000),
)
commands = st.lists(
    st.one_of(create_tenant, create_jobs, job_command, backfill_job), min_size=1, max_size=40
)


def blobs_for(sequence: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
    ids = itertools.count()
    return [
        encode(Command(type=kind, id=f"c{next(ids)}", ts_ms=1_790_000_000_000 + i, body=body))
        for i, (kind, body) in enumerate(sequence)
    ]


def apply_all(path: Path, blobs: list[bytes], start: int = 0) -> tuple[int, str]:
    db = Database(path)
    try:
        machine = StateMachine(db)
        for index, blob in enumerate(blobs[start:], start=start + 1):
            machine.apply(blob, index=index)
        return state_digest(db.conn)
    finally:
        db.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(commands, st.data())
def test_same_commands_give_same_digest_fresh_and_after_replay(
    sequence: list[tuple[str, dict[str, Any]]], data: st.DataObject
) -> None:
    blobs = blobs_for(sequence)
    with tempfile.TemporaryDirectory() as tmp:
        first = apply_all(Path(tmp) / "a.db", blobs)
        second = apply_all(Path(tmp) / "b.db", blobs)
        assert first == second
        # A node that stopped after `cut` entries and restarted replays the whole journal:
        # entries it already holds are skipped, and it ends in the same state.
        cut = data.draw(st.integers(0, len(blobs)))
        apply_all(Path(tmp) / "c.db", blobs[:cut])
        assert apply_all(Path(tmp) / "c.db", blobs) == first


def test_stored_results_do_not_depend_on_key_order(tmp_path: Path, monkeypatch: Any) -> None:
    """Two code versions that build the same result with keys in another order store the same
    text, so their digests agree mid rolling upgrade."""
    import schedd.store.apply.machine as apply_module

    real = apply_module.HANDLERS["create_tenant"]

    def reordered(tx: Any, cmd: Command) -> dict[str, Any]:
        result = real(tx, cmd) | {"extra": 1, "another": 2}
        return dict(reversed(list(result.items())))

    body = {
        "tenant_id": "t1",
        "name": "t1",
        "token_hash": "h",
        "signing_secret": "s",
        "max_active_jobs": 5,
        "dispatch_rate": 10,
        "allowed_hosts": [],
    }
    digests = []
    for name, handler in (
        ("a", lambda tx, cmd: real(tx, cmd) | {"another": 2, "extra": 1}),
        ("b", reordered),
    ):
        monkeypatch.setitem(apply_module.HANDLERS, "create_tenant", handler)
        db = Database(tmp_path / f"{name}.db")
        StateMachine(db).apply(
            encode(Command(type="create_tenant", id="c1", ts_ms=1_790_000_000_000, body=body)),
            index=1,
        )
        digests.append(state_digest(db.conn))
    assert digests[0] == digests[1]
