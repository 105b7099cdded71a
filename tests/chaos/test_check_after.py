"""The "run B after A" check (issue 33 §2) on made-up histories: each run of B that A's end made
is explained by A's run at its slot and B's link at the time, and each end of A while the link
was surely in force made one run of B; ambiguous boundaries pass. Runs in milliseconds."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from schedd.model import AfterSchedule, EverySchedule, Schedule
from schedd.timeformat import format_instant
from tests.chaos.check_deliveries import check_deliveries
from tests.chaos.check_runs import (
    AFTER_GRACE_MS,
    AFTER_SLACK_MS,
    LATE_BOUND_MS,
    JobTimeline,
    check_after,
    check_job,
    owed_after_runs,
)
from tests.chaos.collect import NodeView
from tests.chaos.history import QueueDelivery

T0 = 1_790_000_000_000
END = 60_000  # A's every 2 s schedule runs until T0 + END
LATER = T0 + END + 10 * AFTER_GRACE_MS  # the collection, long after every end
A_EVERY = EverySchedule(interval_ms=2_000, start_at_ms=T0, end_at_ms=T0 + END)
ENDS_AFTER_MS = 400  # an A run ends this long after its slot


def a_run(at_ms: int, status: str = "succeeded") -> dict[str, Any]:
    return {
        "scheduled_at": format_instant(at_ms),
        "scheduled_at_ms": at_ms,
        "fire_at_ms": at_ms,
        "dispatched_at_ms": at_ms + 5,
        "dispatched_at": format_instant(at_ms + 5),
        "finished_at_ms": at_ms + ENDS_AFTER_MS,
        "status": status,
        "error": None,
    }


def b_run(a: dict[str, Any], upstream: str = "job_a", **by: Any) -> dict[str, Any]:
    """B's run made by the end of run `a` of `upstream` (fired as it ended)."""
    ended = a["finished_at_ms"]
    triggered_by = {"job_id": upstream, "scheduled_at": a["scheduled_at"], "status": a["status"]}
    return {
        "scheduled_at": a["scheduled_at"],
        "scheduled_at_ms": a["scheduled_at_ms"],
        "fire_at": format_instant(ended),
        "fire_at_ms": ended,
        "dispatched_at_ms": ended + 5,
        "dispatched_at": format_instant(ended + 5),
        "finished_at_ms": ended + 300,
        "status": "succeeded",
        "error": None,
        "triggered_by": triggered_by | by,
    }


def timeline(
    job_id: str,
    runs: list[dict[str, Any]],
    schedule: Schedule,
    *,
    first: Schedule | None = None,
    status: str = "active",
    created_ms: int = T0 - 2 * AFTER_SLACK_MS,
    target: str = "queue",
    **times: int | None,
) -> JobTimeline:
    return JobTimeline(
        job_id=job_id,
        job={"job_id": job_id, "status": status, "target": {"type": target}},
        runs=runs,
        created_ms=created_ms,
        first_schedule=first or schedule,
        final_schedule=schedule,
        update_ms=times.get("update_ms"),
        cancel_ms=times.get("cancel_ms"),
        pause_ms=times.get("pause_ms"),
        resume_ms=times.get("resume_ms"),
        triggers=frozenset(),
        update_acked_ms=None,
        cancel_acked_ms=None,
        pause_acked_ms=None,
        window_ms=0,
        misfire="run_once",
        overlap="allow",
        threshold_ms=10_000,
    )


def a_runs(status: str = "succeeded") -> list[dict[str, Any]]:
    return [a_run(T0 + k * 2_000, status) for k in range(END // 2_000 + 1)]


def pair(
    b_runs: list[dict[str, Any]],
    a: list[dict[str, Any]] | None = None,
    on: str = "success",
    *,
    end_ms: int = LATER,
    a_target: str = "queue",
    **b_times: Any,
) -> list[str]:
    """The violation kinds of B (after A on `on`) with these runs, A with `a` (all succeeded)."""
    upstream = timeline("job_a", a_runs() if a is None else a, A_EVERY, status="completed")
    upstream.job["target"]["type"] = a_target
    b = timeline("job_b", b_runs, AfterSchedule(job_id="job_a", on=on), **b_times)
    found = check_after({"job_a": upstream, "job_b": b}, end_ms)
    return sorted(v.kind for v in found + check_job(b))


def test_every_end_of_a_made_one_run_of_b() -> None:
    assert pair([b_run(a) for a in a_runs()]) == []
    upstream = timeline("job_a", a_runs(), A_EVERY, status="completed")
    b = timeline("job_b", [], AfterSchedule(job_id="job_a", on="finished"))
    assert owed_after_runs({"job_a": upstream, "job_b": b}, LATER) == len(a_runs())


def test_an_end_that_made_no_run_is_missing_and_two_runs_at_a_slot_are_twice() -> None:
    runs = [b_run(a) for a in a_runs()]
    assert pair(runs[:5] + runs[6:]) == ["after_run_missing"]
    assert pair([*runs, runs[7]]) == ["after_run_twice"]


def test_ends_that_match_no_on_make_nothing_and_a_run_for_one_is_unexplained() -> None:
    dead = a_runs("dead")
    assert pair([], dead) == []  # on success: a dead run of A gives B nothing
    assert pair([], a_runs(), on="failure") == []
    assert pair([b_run(a) for a in dead], dead, on="failure") == []
    assert pair([b_run(a) for a in dead], dead, on="finished") == []
    assert set(pair([b_run(a) for a in dead], dead)) == {"after_run_unexplained"}
    assert pair([], dead, on="finished") == ["after_run_missing"] * len(dead)


def test_a_run_naming_an_end_that_did_not_happen_is_unexplained() -> None:
    runs = [b_run(a) for a in a_runs()]
    lying = [*runs[:3], dict(runs[3], triggered_by={**runs[3]["triggered_by"], "status": "dead"})]
    assert pair(lying + runs[4:], on="finished") == ["after_run_unexplained"]
    gone = a_runs()
    del gone[3]  # A has no run at B's slot
    assert pair(runs, gone) == ["after_run_unexplained"]
    early = dict(runs[2], fire_at_ms=runs[2]["fire_at_ms"] - AFTER_SLACK_MS - 1_000)
    assert pair([*runs[:2], early, *runs[3:]]) == ["after_run_unexplained"]  # before A's end
    stranger = [b_run(a, upstream="job_c") for a in a_runs()[:1]]
    assert pair(stranger + runs[1:]) == ["after_run_unexplained"]  # B never ran after job_c


def test_a_run_of_an_after_job_with_no_triggered_by_is_unexplained() -> None:
    runs = [b_run(a) for a in a_runs()]
    plain = {k: v for k, v in runs[4].items() if k != "triggered_by"}
    plain["fire_at_ms"] = plain["scheduled_at_ms"]
    assert pair([*runs[:4], plain, *runs[5:]]) == ["after_run_unexplained"]


def test_an_after_job_stays_active_and_its_runs_are_not_the_walks() -> None:
    """Active for good (no not_quiescent), fire times at A's end (no wrong_fire_time), no own
    schedule (no extra_run)."""
    b = timeline("job_b", [b_run(a) for a in a_runs()], AfterSchedule(job_id="job_a"))
    assert check_job(b) == []


def test_ends_near_the_links_start_are_either_way_and_before_it_unexplained() -> None:
    runs = [b_run(a) for a in a_runs()]
    created = T0 + 20_000  # B created after A's run at 20 s ended
    after_creation = [r for r in runs if r["fire_at_ms"] >= created]
    assert pair(after_creation, created_ms=created) == []
    # The runs at 10-18 s ended up to AFTER_SLACK_MS before the create: either commit order.
    near = [r for r in runs if r["fire_at_ms"] >= created - AFTER_SLACK_MS]
    assert pair(near, created_ms=created) == []
    # Ended well before B existed: its link cannot have made them.
    kinds = pair(runs, created_ms=created)
    assert kinds and set(kinds) == {"after_run_unexplained"}
    late = created + AFTER_SLACK_MS + 2_000  # and a run of A well after the create is owed
    assert pair([r for r in after_creation if r["fire_at_ms"] < late], created_ms=created)


def test_a_cancel_ends_the_link_with_the_claim_bound_before_it() -> None:
    runs = [b_run(a) for a in a_runs()]
    cancel = T0 + 50_000
    margin = AFTER_SLACK_MS + LATE_BOUND_MS  # an end this close may lose its unclaimed run
    before = [r for r in runs if r["fire_at_ms"] < cancel]
    stop = {"status": "cancelled", "cancel_ms": cancel}
    assert pair(before, **stop) == []
    assert pair([r for r in runs if r["fire_at_ms"] < cancel - margin], **stop) == []
    owed = [r for r in runs if r["fire_at_ms"] < cancel - margin - 2_000]
    assert pair(owed, **stop) == ["after_run_missing"]  # one end before the margin
    assert pair(runs, **stop) == ["after_run_unexplained"]  # 60 s: past the cancel + slack


def test_an_http_upstreams_end_may_be_recorded_late() -> None:
    """An HTTP outcome carries its caller's clock: within the late bound of a pause its run of
    B may be missing; a queue's end is stamped as it applies."""
    runs = [b_run(a) for a in a_runs()]
    pause = T0 + 40_000
    kept = [r for r in runs if r["fire_at_ms"] < pause - AFTER_SLACK_MS - 8_000]
    paused = {"pause_ms": pause, "status": "paused"}
    assert pair(kept, a_target="http", **paused) == []
    assert set(pair(kept, **paused)) == {"after_run_missing"}


def test_a_pause_stops_the_runs_until_the_resume() -> None:
    runs = [b_run(a) for a in a_runs()]
    pause, resume = T0 + 16_000, T0 + 44_000
    gap = [r for r in runs if not pause <= r["fire_at_ms"] <= resume]
    times = {"pause_ms": pause, "resume_ms": resume}
    assert pair(gap, **times) == []
    kinds = pair(runs, **times)  # fired well inside the pause
    assert kinds and set(kinds) == {"after_run_unexplained"}
    resumed_late = [r for r in gap if r["fire_at_ms"] < resume + AFTER_SLACK_MS + 4_000]
    assert pair(resumed_late, **times) == ["after_run_missing"] * 2  # ends at 58.4 and 60.4 s


def test_a_reschedule_moves_the_link_to_another_upstream() -> None:
    a1 = timeline("job_a", a_runs(), A_EVERY, status="completed")
    a2 = timeline("job_c", a_runs(), A_EVERY, status="completed")
    update = T0 + 30_000
    runs = [
        b_run(a) if a["finished_at_ms"] < update else b_run(c, upstream="job_c")
        for a, c in zip(a1.runs, a2.runs, strict=True)
    ]
    b = timeline(
        "job_b",
        runs,
        AfterSchedule(job_id="job_c", on="finished"),
        first=AfterSchedule(job_id="job_a"),
        update_ms=update,
    )
    jobs = {"job_a": a1, "job_c": a2}
    assert check_after(jobs | {"job_b": b}, LATER) == []
    # A run job_a's end made well after the move is unexplained (its slot is job_c's too).
    wrong = replace(b, runs=[*runs[:-1], b_run(a1.runs[-1])])
    kinds = [v.kind for v in check_after(jobs | {"job_b": wrong}, LATER)]
    assert kinds == ["after_run_unexplained"]
    lost = replace(b, runs=runs[:-1])
    assert [v.kind for v in check_after(jobs | {"job_b": lost}, LATER)] == ["after_run_missing"]


def test_the_on_is_the_one_in_force_when_the_run_fired() -> None:
    """B after A on success, then after A on failure: a run for a success after the change is
    unexplained though the first link matched it."""
    upstream = timeline("job_a", a_runs(), A_EVERY, status="completed")
    update = T0 + 20_000
    runs = [b_run(a) for a in upstream.runs if a["finished_at_ms"] < update]
    b = timeline(
        "job_b",
        runs,
        AfterSchedule(job_id="job_a", on="failure"),
        first=AfterSchedule(job_id="job_a"),
        update_ms=update,
    )
    assert check_after({"job_a": upstream, "job_b": b}, LATER) == []
    late = replace(b, runs=[*runs, b_run(upstream.runs[-1])])
    kinds = [v.kind for v in check_after({"job_a": upstream, "job_b": late}, LATER)]
    assert kinds == ["after_run_unexplained"]


def test_ends_within_the_grace_of_the_collection_are_not_owed() -> None:
    runs = [b_run(a) for a in a_runs()]
    last_end = runs[-1]["fire_at_ms"]
    assert pair(runs[:-1], end_ms=last_end + AFTER_GRACE_MS - 1) == []
    assert pair(runs[:-1], end_ms=last_end + AFTER_GRACE_MS + 1) == ["after_run_missing"]


def test_a_doomed_jobs_runs_must_die_and_the_others_succeed() -> None:
    runs = [dict(a, fire_at_ms=a["scheduled_at_ms"]) for a in a_runs()[:2]]
    job = {"job_id": "job_x", "tenant_id": "t", "payload": {"name": "x", "doomed": True}}
    view = NodeView("n1", jobs={"job_x": job}, runs={"job_x": runs})

    def got(r: dict[str, Any]) -> QueueDelivery:
        key = f"job_x:{r['scheduled_at']}"
        return QueueDelivery(
            r["fire_at_ms"] + 50, "t0", "q0", "n1", "job_x", r["scheduled_at"], 1, key
        )

    seen = [got(r) for r in runs]
    assert [v.kind for v in check_deliveries(seen, [], [], view)[1]] == ["doomed_run_not_dead"] * 2
    dead = [dict(r, status="dead") for r in runs]
    assert check_deliveries(seen, [], [], replace(view, runs={"job_x": dead}))[1] == []
    lived = replace(view, jobs={"job_x": {**job, "payload": {"name": "x"}}}, runs={"job_x": dead})
    assert [v.kind for v in check_deliveries(seen, [], [], lived)[1]] == ["run_not_succeeded"] * 2
