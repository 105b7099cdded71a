"""An attempt's output and a nack that kills (issue 34, log level 12) in the state machine: an
ack or nack keeps the output its receipts report, per run and for batch slots, a receipt it does
not settle keeps nothing, a `dead` nack buries the run with attempts left, and retention drops
the outputs with their runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schedd.api import jobs as jobs_api
from schedd.store import history_reads, run_outputs
from schedd.wire.jobs import RunView
from tests.conftest import NOW_MS
from tests.unit.test_store_batches import Store, claim, one_time
from tests.unit.test_store_retention import prune


def outputs(s: Store) -> list[tuple[Any, ...]]:
    return s.db.conn.execute(
        "SELECT job_id, scheduled_at_ms, attempt, output FROM run_outputs ORDER BY 1, 2, 3"
    ).fetchall()


def receipt(s: Store) -> str:
    [handed] = s.handed
    text: str = handed["receipt"]
    return text


@pytest.mark.parametrize("form", ["claim_runs", "claim_batch"])
def test_an_ack_keeps_the_output_of_the_attempt_it_ends(tmp_path: Path, form: str) -> None:
    s = Store(tmp_path / "s.db")
    one_time(s.apply)
    claim(s.apply, form)
    s.receive(NOW_MS)
    mine = receipt(s)
    extra = {"outputs": {mine: "hello\n", "n9.not-a-receipt": "ignored"}}
    assert s.settle("ack_messages", NOW_MS + 5, **extra)["acked"] == 1
    assert outputs(s) == [("j1", NOW_MS, 1, "hello\n")]
    again = s.settle("ack_messages", NOW_MS + 6, outputs={mine: "twice"})  # no longer held
    assert again["acked"] == 0 and outputs(s) == [("j1", NOW_MS, 1, "hello\n")]


@pytest.mark.parametrize("form", ["claim_runs", "claim_batch"])
def test_a_nack_keeps_each_attempts_output_and_dead_buries_at_once(
    tmp_path: Path, form: str
) -> None:
    s = Store(tmp_path / "s.db")
    one_time(s.apply)  # two attempts (RETRY)
    claim(s.apply, form)
    s.receive(NOW_MS)
    s.settle("nack_messages", NOW_MS + 1, error="exit 1", outputs={receipt(s): "first"})
    status = s.db.conn.execute("SELECT status FROM runs").fetchone()
    assert status == ("retrying",)
    s.receive(NOW_MS + 20_000)
    s.settle("nack_messages", NOW_MS + 20_001, error="exit 2", outputs={receipt(s): "second"})
    assert outputs(s) == [("j1", NOW_MS, 1, "first"), ("j1", NOW_MS, 2, "second")]


@pytest.mark.parametrize("form", ["claim_runs", "claim_batch"])
def test_a_dead_nack_makes_a_dead_letter_with_attempts_left(tmp_path: Path, form: str) -> None:
    s = Store(tmp_path / "s.db")
    one_time(s.apply)
    claim(s.apply, form)
    s.receive(NOW_MS)
    s.settle("nack_messages", NOW_MS + 1, error="no user 'alice'", dead=True)
    run = s.db.conn.execute("SELECT status, attempt, error FROM runs").fetchone()
    assert run == ("dead", 1, "no user 'alice'")
    letters = s.db.conn.execute("SELECT attempts, error FROM deadletters").fetchall()
    assert letters == [(1, "no user 'alice'")]
    assert s.receive(NOW_MS + 20_000) == []  # never delivered again


def test_retention_drops_outputs_with_their_runs(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    one_time(s.apply)
    claim(s.apply, "claim_runs")
    s.receive(NOW_MS)
    s.settle("ack_messages", NOW_MS + 5, outputs={receipt(s): "done"})
    assert len(outputs(s)) == 1
    prune(s.apply, NOW_MS + 400 * 86_400_000, max_rows=100_000)
    assert outputs(s) == []


def test_a_runs_page_with_outputs_ends_before_passing_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = Store(tmp_path / "s.db")
    one_time(s.apply)
    # Four finished runs of j1, each attempt with an output of 10 characters (written here:
    # what acks would have written).
    kept = [("j1", NOW_MS + k, 1, "0123456789") for k in range(4)]
    s.db.conn.executemany(
        "INSERT INTO attempts (job_id, scheduled_at_ms, attempt, started_at_ms) "
        "VALUES (?, ?, ?, ?)",
        [(j, at, a, NOW_MS) for j, at, a, _ in kept],
    )
    s.db.conn.executemany(
        "INSERT INTO runs (job_id, scheduled_at_ms, tenant_id, fire_at_ms, status, attempt) "
        "VALUES (?, ?, 't1', ?, 'succeeded', 1)",
        [(j, at, at) for j, at, _, _ in kept],
    )
    run_outputs.keep(s.db.conn, kept)
    history = history_reads.SegmentReaders(tmp_path)

    def page(with_outputs: bool) -> tuple[list[RunView], bool]:
        runs, cut, is_complete = jobs_api._runs_page(
            s.db.conn,
            history,
            "j1",
            2**62,
            10,
            with_outputs=with_outputs,
            not_before_ms=0,
            since_ms=0,
        )
        assert is_complete
        return runs, cut

    runs, cut = page(with_outputs=True)
    assert (len(runs), cut) == (4, False)
    assert all(r.attempts[0].output == "0123456789" for r in runs)
    monkeypatch.setattr(jobs_api, "MAX_PAGE_OUTPUT_CHARS", 25)
    runs, cut = page(with_outputs=True)
    assert (len(runs), cut) == (2, True)  # a third would pass 25 characters
    runs, cut = page(with_outputs=False)
    assert (len(runs), cut) == (4, False) and runs[0].attempts[0].output is None
