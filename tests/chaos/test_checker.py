"""The checker finds what it must on made-up histories (and nothing on correct ones): missing,
extra and duplicated runs, claims after a cancel or a reschedule, unexplained skips, undelivered
or early deliveries, lost or phantom creates. Runs in milliseconds, no cluster."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from schedd.model import AtSchedule, EverySchedule, Schedule
from schedd.timeformat import format_instant
from tests.chaos.check_deliveries import check_deliveries
from tests.chaos.check_runs import LATE_BOUND_MS, JobTimeline, check_job
from tests.chaos.checker import (
    Claim,
    _changes,
    _creates,
    _outputs_placed,
    queue_pauses,
    two_leaders,
)
from tests.chaos.collect import NodeView, leader_terms
from tests.chaos.history import Op, QueueDelivery

T0 = 1_790_000_000_000
EVERY_2S = EverySchedule(interval_ms=2_000, start_at_ms=T0, end_at_ms=T0 + 20_000)


def run(
    at_ms: int,
    *,
    claimed_ms: int | None = None,
    status: str = "succeeded",
    error: str | None = None,
) -> dict[str, Any]:
    claimed = at_ms + 5 if claimed_ms is None else claimed_ms
    return {
        "scheduled_at": format_instant(at_ms),
        "fire_at": format_instant(at_ms),
        "scheduled_at_ms": at_ms,
        "fire_at_ms": at_ms,
        "dispatched_at_ms": claimed,
        "status": status,
        "error": error,
        "dispatched_at": format_instant(claimed),
        "attempts": [{"attempt": 1, "started_at_ms": claimed + 10}],
    }


def timeline(
    runs: list[dict[str, Any]],
    *,
    status: str = "completed",
    schedule: Schedule = EVERY_2S,
    first: Schedule | None = None,
    misfire: str = "run_once",
    overlap: str = "allow",
    triggers: frozenset[int] = frozenset(),
    **times: int | None,
) -> JobTimeline:
    return JobTimeline(
        job_id="job_x",
        job={"job_id": "job_x", "status": status},
        runs=runs,
        created_ms=T0,
        first_schedule=first or schedule,
        final_schedule=schedule,
        update_ms=times.get("update_ms"),
        cancel_ms=times.get("cancel_ms"),
        pause_ms=times.get("pause_ms"),
        resume_ms=times.get("resume_ms"),
        triggers=triggers,
        update_acked_ms=times.get("update_acked_ms"),
        cancel_acked_ms=times.get("cancel_acked_ms"),
        pause_acked_ms=times.get("pause_acked_ms"),
        window_ms=0,
        misfire=misfire,
        overlap=overlap,
        threshold_ms=10_000,
    )


def every_2s(first: int = 1, last: int = 10) -> list[dict[str, Any]]:
    return [run(T0 + k * 2_000) for k in range(first, last + 1)]


def kinds(t: JobTimeline) -> list[str]:
    return [v.kind for v in check_job(t)]


def test_a_complete_recurring_history_passes() -> None:
    assert kinds(timeline(every_2s())) == []


def test_a_run_missing_in_the_middle_is_found() -> None:
    runs = every_2s()
    del runs[4]
    assert kinds(timeline(runs)) == ["missing_run"]


def test_a_completed_job_whose_schedule_had_runs_left_is_missing_its_tail() -> None:
    assert kinds(timeline(every_2s(last=8))) == ["missing_run"]


def test_a_run_off_the_schedule_is_extra() -> None:
    runs = sorted([*every_2s(), run(T0 + 5_000)], key=lambda r: r["scheduled_at_ms"])
    assert "extra_run" in kinds(timeline(runs))


def test_a_run_twice_is_a_duplicate() -> None:
    runs = every_2s()
    runs.insert(3, dict(runs[3]))
    assert "duplicate_run" in kinds(timeline(runs))


def test_a_gap_after_a_late_claim_is_the_misfire_policy_unless_run_all() -> None:
    runs = every_2s()
    late = run(T0 + 4_000, claimed_ms=T0 + 4_000 + 11_000)  # past the 10 s threshold
    caught_up = [r for r in runs if r["scheduled_at_ms"] > T0 + 15_000]
    history = [runs[0], late, *caught_up]
    assert kinds(timeline(history)) == []
    assert "missing_run" in kinds(timeline(history, misfire="run_all"))


def test_a_gap_after_an_on_time_claim_is_missing() -> None:
    runs = every_2s()
    history = [runs[0], runs[1], *runs[6:]]
    assert kinds(timeline(history)) == ["missing_run"]


def test_cancel_stops_the_runs_but_not_runs_due_long_before_it() -> None:
    runs = every_2s(last=4)
    assert kinds(timeline(runs, status="cancelled", cancel_ms=T0 + 9_000)) == []
    late_cancel = T0 + 10_000 + LATE_BOUND_MS + 1_000
    assert kinds(timeline(runs, status="cancelled", cancel_ms=late_cancel)) == ["missing_run"]


def test_a_run_claimed_after_the_cancel_answered_is_a_violation() -> None:
    runs = every_2s(last=4)
    found = kinds(timeline(runs, status="cancelled", cancel_ms=T0, cancel_acked_ms=T0 + 7_000))
    assert found == ["claimed_after_cancel"]


def test_a_reschedule_splits_the_history_between_two_schedules() -> None:
    new = EverySchedule(interval_ms=3_000, start_at_ms=T0 + 9_500, end_at_ms=T0 + 16_000)
    runs = every_2s(last=4) + [run(T0 + 9_500 + k * 3_000) for k in range(3)]
    t = timeline(runs, first=EVERY_2S, schedule=new, update_ms=T0 + 9_000)
    assert kinds(t) == []
    claimed_late = [*runs[:3], run(T0 + 8_000, claimed_ms=T0 + 9_600), *runs[4:]]
    t = timeline(
        claimed_late, first=EVERY_2S, schedule=new, update_ms=T0 + 9_000, update_acked_ms=T0 + 9_100
    )
    assert kinds(t) == ["claimed_after_reschedule"]


def test_a_pause_stops_the_runs_and_a_resume_starts_at_the_next_occurrence() -> None:
    paused = {"pause_ms": T0 + 6_500, "pause_acked_ms": T0 + 6_600}
    before = every_2s(1, 3)  # 2, 4, 6 s; the pause at 6.5 s drops 8-12 s
    after = every_2s(7, 10)  # the resume at 13 s: next occurrence 14 s
    ok = timeline(before + after, **paused, resume_ms=T0 + 13_000)
    assert kinds(ok) == []
    assert kinds(timeline(before, status="paused", **paused)) == []  # never resumed: fine
    inside = timeline(before + every_2s(5, 10), **paused, resume_ms=T0 + 13_000)
    assert kinds(inside) == ["claimed_while_paused"] * 2  # 10 and 12 s fell inside the pause
    assert "not_quiescent" in kinds(timeline(before, status="paused"))  # paused by nobody


def test_a_trigger_adds_one_run_outside_the_schedule() -> None:
    trigger = T0 + 5_123
    runs = sorted([*every_2s(), run(trigger)], key=lambda r: r["scheduled_at_ms"])
    assert kinds(timeline(runs, triggers=frozenset({trigger}))) == []
    assert kinds(timeline(runs)) == ["extra_run"]  # no trigger committed
    assert kinds(timeline(every_2s(), triggers=frozenset({trigger}))) == ["missing_trigger_run"]
    cancelled = timeline(every_2s(), triggers=frozenset({trigger}), cancel_ms=trigger + 1)
    assert "missing_trigger_run" not in kinds(cancelled)


def test_skips_need_their_documented_reason() -> None:
    once = AtSchedule(at_ms=T0 + 1_000)
    skipped = run(
        T0 + 1_000,
        status="skipped",
        error="skipped: missed while dispatch was down (misfire_policy skip)",
    )
    assert kinds(timeline([skipped], schedule=once)) == ["unexplained_skip"]
    late = dict(skipped, dispatched_at_ms=T0 + 12_000)
    assert kinds(timeline([late], schedule=once, misfire="skip")) == []


def test_a_calendar_skip_needs_the_exclude_and_the_date_and_a_holiday_run_is_found() -> None:
    """Issue 33: a run skipped "calendar:hols" must be of a job excluding the calendar, on one
    of its dates (UTC for every); a run on such a date that was not skipped is a violation."""
    day = format_instant(T0)[:10]
    runs = every_2s()
    skipped = [dict(r, status="skipped", error="calendar:hols") for r in runs]
    base = timeline(skipped)
    assert kinds(replace(base, excludes=True, calendar=frozenset({day}))) == []
    assert set(kinds(base)) == {"unexplained_skip"}  # no exclude
    assert set(kinds(replace(base, excludes=True))) == {"unexplained_skip"}  # another date
    delivered = replace(timeline(runs), excludes=True, calendar=frozenset({day}))
    assert set(kinds(delivered)) == {"calendar_not_honoured"}


def test_deliveries_must_cover_every_claimed_run_on_time() -> None:
    view = NodeView(
        "n1",
        jobs={"job_x": {"job_id": "job_x", "tenant_id": "t"}},
        runs={"job_x": every_2s(last=3)},
    )
    runs = view.runs["job_x"]

    def got(r: dict[str, Any], at_ms: int, attempt: int = 1) -> QueueDelivery:
        key = f"job_x:{r['scheduled_at']}"
        return QueueDelivery(at_ms, "t0", "q0", "n1", "job_x", r["scheduled_at"], attempt, key)

    fine = [got(r, r["fire_at_ms"] + 50) for r in runs]
    assert check_deliveries(fine, [], [], view)[1] == []
    early = [got(runs[0], runs[0]["fire_at_ms"] - 500), *fine[1:]]
    assert [v.kind for v in check_deliveries(early, [], [], view)[1]] == ["early_delivery"]
    lost = fine[1:]
    assert [v.kind for v in check_deliveries(lost, [], [], view)[1]] == ["undelivered_run"]
    twice = [*fine, got(runs[1], runs[1]["fire_at_ms"] + 900)]
    assert [v.kind for v in check_deliveries(twice, [], [], view)[1]] == ["queue_attempt_twice"]


def op(outcome: str, name: str, job_id: str | None) -> Op:
    response = {"job_id": job_id} if job_id else {}
    return Op(1, "w", "create", "t0", "n1", T0, T0 + 5, outcome, 201, {"name": name}, response)  # type: ignore[arg-type]


def test_creates_acked_lost_failed_applied_and_duplicated_are_found() -> None:
    view = NodeView(
        "n1",
        jobs={"j1": {"name": "a"}, "j2": {"name": "b"}, "j3": {"name": "c"}, "j4": {"name": "c"}},
    )
    claims = {
        "a": [Claim("ok", "j1", op("ok", "a", "j1"), {})],
        "b": [Claim("failed", None, op("failed", "b", None), {})],
        "c": [Claim("unknown", None, op("unknown", "c", None), {})],
        "d": [Claim("ok", "j9", op("ok", "d", "j9"), {})],
    }
    found = sorted(v.kind for v in _creates(claims, {"n1": view}))
    assert found == ["acked_create_lost", "duplicate_job", "failed_request_applied"]


def test_an_attempt_dated_before_its_runs_claim_is_misattributed() -> None:
    runs = every_2s(last=1)
    runs[0]["attempts"] = [{"attempt": 1, "started_at_ms": runs[0]["dispatched_at_ms"] - 400}]
    view = NodeView(
        "n1", jobs={"job_x": {"job_id": "job_x", "tenant_id": "t"}}, runs={"job_x": runs}
    )
    key = f"job_x:{runs[0]['scheduled_at']}"
    seen = [
        QueueDelivery(
            runs[0]["fire_at_ms"] + 9, "t0", "q0", "n1", "job_x", runs[0]["scheduled_at"], 1, key
        )
    ]
    assert [v.kind for v in check_deliveries(seen, [], [], view)[1]] == ["attempt_before_claim"]


def test_a_resume_of_a_job_not_paused_is_a_no_op_not_a_lost_write() -> None:
    def op(kind: str, outcome: str, at: int = 0) -> Op:
        return Op(
            op_id=1,
            process="w",
            kind=kind,
            tenant="t0",
            node="n1",
            start_ms=T0 + at,
            end_ms=T0 + at + 5,
            outcome=outcome,
            status=200 if outcome == "ok" else None,
            request={"job_id": "job_x"},
        )

    created = {"action": "create_jobs", "job_id": "job_x", "at": format_instant(T0)}
    view = NodeView(node_id="n1", audit=[created])
    # the pause's outcome was unknown and it never committed; the resume then found it active
    assert _changes([op("pause", "unknown"), op("resume", "ok", 100)], view) == []
    paused = {"action": "pause_job", "job_id": "job_x", "at": format_instant(T0 + 1)}
    view = NodeView(node_id="n1", audit=[created, paused])
    # ... or it committed only after the resume had found the job active (seed 1021)
    assert _changes([op("pause", "unknown"), op("resume", "ok", 100)], view) == []
    lost = _changes([op("pause", "ok"), op("resume", "ok", 100)], view)
    assert [v.kind for v in lost] == ["acked_resume_lost"]


def test_overlap_delay_may_hold_the_next_run_while_one_is_in_flight() -> None:
    """Seed 1600: a consumer 40 s behind kept a `delay` job's last run in flight, so its next
    run was rightly never claimed before the cancel; it is no missing run."""
    runs = every_2s(last=4)
    for r in runs:
        r["finished_at_ms"] = r["scheduled_at_ms"] + 100
    runs[-1]["finished_at_ms"] = None  # still in the queue when the job was cancelled
    stop = T0 + 10_000 + LATE_BOUND_MS + 10_000
    assert kinds(timeline(runs, status="cancelled", cancel_ms=stop, overlap="delay")) == []
    assert kinds(timeline(runs, status="cancelled", cancel_ms=stop)) == ["missing_run"]
    runs[-1]["finished_at_ms"] = runs[-1]["scheduled_at_ms"] + 100  # finished in time: no excuse
    found = kinds(timeline(runs, status="cancelled", cancel_ms=stop, overlap="delay"))
    assert found == ["missing_run"]


def test_two_leaders_of_one_term_are_flagged_from_the_node_logs(tmp_path: Path) -> None:
    """Issue 27: the wipe_storm fault's rule. n3 lost its data directory, voted again in term 7
    and n2 led it too; other terms had one leader each, and a node leading the same term twice
    in its log (it cannot, but a repeated line) is not two leaders."""
    logs = {
        "n1": "... INFO schedd.raft.replica raft leader term=3\n"
        "... INFO schedd.raft.replica raft leader term=7\n",
        "n2": "... INFO schedd.raft.replica raft leader term=5\n"
        "... INFO schedd.raft.replica raft leader term=7\n",
        "n3": "... WARNING schedd.raft.votes raft vote fence learned term=7: ...\n"
        "... INFO schedd.raft.replica raft leader term=9\n"
        "... INFO schedd.raft.replica raft leader term=9\n",
    }
    for node_id, text in logs.items():
        (tmp_path / f"{node_id}.log").write_text(text)
    terms = leader_terms({n: tmp_path / f"{n}.log" for n in [*logs, "n4"]})  # n4: no log
    assert terms == {"n1": [3, 7], "n2": [5, 7], "n3": [9, 9], "n4": []}
    found = two_leaders(terms)
    assert [(v.kind, v.detail) for v in found] == [("two_leaders_in_term", "term 7: ['n1', 'n2']")]
    assert two_leaders({"n1": [3, 7], "n2": [5, 8], "n3": [9, 9]}) == []


# ------------------------------------------------------------------ backfills

EARLIER = EverySchedule(interval_ms=2_000, start_at_ms=T0 - 10_000, end_at_ms=T0 + 20_000)
ASKED = (T0 - 10_000, T0 + 10_000)  # answered at T0 + 10.5 s


def backfilled(at_ms: int, k: int) -> dict[str, Any]:
    fires = T0 + 10_500 + k  # paced on the tenant's lane from the answer on
    return run(at_ms) | {
        "backfill": True,
        "fire_at": format_instant(fires),
        "fire_at_ms": fires,
        "dispatched_at": format_instant(fires + 2),
        "dispatched_at_ms": fires + 2,
    }


def backfill_timeline(
    runs: list[dict[str, Any]], outcome: str = "ok", asked: tuple[int, int] = ASKED
) -> JobTimeline:
    t = timeline(runs, schedule=EARLIER)
    return JobTimeline(
        **{f: getattr(t, f) for f in JobTimeline.__dataclass_fields__}
        | {"backfills": ((*asked, outcome, T0 + 10_500),)}
    )


def before_creation() -> list[dict[str, Any]]:
    return [backfilled(T0 - 10_000 + k * 2_000, k) for k in range(5)]


def test_backfill_runs_are_outside_the_walk_and_fire_paced() -> None:
    runs = sorted([*before_creation(), *every_2s()], key=lambda r: r["scheduled_at_ms"])
    assert kinds(backfill_timeline(runs)) == []


def test_an_acknowledged_backfill_missing_an_occurrence_before_the_job_is_found() -> None:
    runs = [*before_creation()[1:], *every_2s()]
    assert kinds(backfill_timeline(runs)) == ["missing_backfill_run"]
    assert kinds(backfill_timeline(runs, outcome="unknown")) == []  # may not have committed


def test_a_backfill_run_outside_every_asked_range_or_off_the_schedule_is_found() -> None:
    outside = backfill_timeline([*before_creation(), *every_2s()], asked=(T0 - 8_000, T0))
    assert kinds(outside) == ["unasked_backfill_run"]
    off = [*before_creation(), backfilled(T0 - 9_000, 9), *every_2s()]
    assert kinds(backfill_timeline(off)) == ["backfill_run_not_due"]
    assert (
        kinds(backfill_timeline(before_creation() + every_2s(), outcome="failed"))
        == ["unasked_backfill_run"] * 5
    )


def _queue_op(kind: str, start: int, end: int, *, keys: int = 0, outcome: str = "ok") -> Op:
    return Op(
        op_id=start,
        process="w",
        kind=kind,
        tenant="t0",
        node="n1",
        start_ms=T0 + start,
        end_ms=T0 + end,
        outcome=outcome,  # type: ignore[arg-type]
        status=200,
        request={"queue": "q0"},
        response={"keys": [f"k{i}" for i in range(keys)]} if kind == "receive" else {},
    )


def test_a_receive_between_a_queues_pause_and_its_resume_that_got_messages_is_found() -> None:
    paused = [_queue_op("pause_queue", 0, 10), _queue_op("resume_queue", 500, 510)]
    inside = _queue_op("receive", 20, 30, keys=2)
    assert [v.kind for v in queue_pauses([*paused, inside])] == ["received_while_paused"]
    # Sent before the pause was answered, or answered after the resume was sent: allowed.
    racing = _queue_op("receive", 5, 30, keys=1)
    after = _queue_op("receive", 400, 520, keys=1)
    empty = _queue_op("receive", 20, 30)
    assert queue_pauses([*paused, racing, after, empty]) == []
    # A pause that failed fences nothing.
    failed = [_queue_op("pause_queue", 0, 10, outcome="failed"), inside]
    assert queue_pauses(failed) == []


def test_an_output_kept_under_another_attempt_is_misplaced() -> None:
    run = {"scheduled_at": "2026-12-05T01:00:00Z", "attempts": [{"attempt": 1}, {"attempt": 2}]}
    view = NodeView("n1", jobs={}, runs={"job_x": [run]})
    run["attempts"][0]["output"] = "job_x:2026-12-05T01:00:00Z#1"
    assert _outputs_placed(view) == []
    run["attempts"][1]["output"] = "job_x:2026-12-05T01:00:00Z#1"  # attempt 1's, under 2
    assert [v.kind for v in _outputs_placed(view)] == ["output_misplaced"]
