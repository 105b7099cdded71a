"""`schedctl backfill`: run a job's past occurrences in a range that have no run, or with
--dry-run count them (and show the first and last) through the API's schedule preview."""

from __future__ import annotations

import time

import click

from schedd.cli.ctl import render
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.render import json_option
from schedd.errors import InvalidBackfill, InvalidRequest, InvalidSchedule
from schedd.timeformat import format_instant, parse_instant

MAX_BACKFILL = 100_000  # the API's limit (api/backfill.py): a dry run says so before a request
PREVIEW_PAGE = 1_000  # the most one preview answers


@click.command(
    epilog="""\b
Examples:
  schedctl backfill job_0123abcd --from 2026-11-01T00:00:00Z --to 2026-11-08T00:00:00Z
  schedctl backfill job_0123abcd --from 2026-11-01T00:00:00+01:00 \\
      --to 2026-11-02T00:00:00+01:00 --dry-run""",
)
@click.argument("job_id")
@click.option(
    "--from", "from_", metavar="INSTANT", required=True, help="First instant (RFC 3339, included)."
)
@click.option(
    "--to", metavar="INSTANT", required=True, help="End of the range (RFC 3339, excluded; past)."
)
@click.option(
    "--dry-run",
    "is_dry_run",
    is_flag=True,
    help="Only count the occurrences (and show the first and last): nothing is written.",
)
@json_option('{"runs": N} (with --dry-run: {"runs": N, "first": ..., "last": ...})')
@click.pass_obj
def backfill(
    client: Client, job_id: str, from_: str, to: str, is_dry_run: bool, as_json: bool
) -> None:
    """Run the occurrences of JOB_ID's schedule in [--from, --to) that have no run yet,
    paced at half the tenant's dispatch rate."""
    from_ms = parse_instant(from_, field="--from")
    to_ms = parse_instant(to, field="--to")
    if from_ms >= to_ms:
        raise InvalidRequest("--from", "must be before --to")
    if not is_dry_run:
        answer = client.backfill_job(job_id, from_=from_, to=to)
        if as_json:
            render.print_json(answer.raw)
        else:
            click.echo(f"{job_id}: {answer.view.runs} runs backfilled")
        return
    if to_ms > int(time.time() * 1000):
        raise InvalidRequest("--to", "must not be after now: a backfill runs past occurrences")
    slots = _preview(client, job_id, from_ms, to_ms)
    first, last = (format_instant(slots[0]), format_instant(slots[-1])) if slots else (None, None)
    if as_json:
        render.print_json({"runs": len(slots), "first": first, "last": last})
        return
    click.echo(f"{job_id}: {len(slots)} occurrences in the range")
    if slots:
        click.echo(f"first {first}\nlast  {last}")
    render.note("a dry run: nothing was written; occurrences that have a run are skipped")


def _preview(client: Client, job_id: str, from_ms: int, to_ms: int) -> list[int]:
    """The job's occurrences in [from, to), page by page of the preview (the job's schedule
    as stored: zone, DST rule, start and end); more than MAX_BACKFILL is refused."""
    schedule = client.get_job(job_id).view.schedule
    after_job = schedule.get("after")
    if isinstance(after_job, dict):  # the node's backfill refuses it: so does its dry run
        raise InvalidBackfill(
            "job_id",
            f"an after schedule has no occurrences to backfill: its runs come from job "
            f"{after_job.get('job_id')}'s (backfill that job)",
        )
    slots: list[int] = []
    after = from_ms - 1
    while True:
        try:
            page = client.preview_schedule(
                schedule, after=format_instant(after), count=PREVIEW_PAGE
            ).view.runs
        except InvalidSchedule:  # no run left after `after`: the schedule has ended
            return slots
        runs = [ms for ms in (parse_instant(t, field="runs") for t in page) if ms < to_ms]
        slots += runs
        if len(slots) > MAX_BACKFILL:
            raise InvalidRequest(
                "--to",
                f"the range holds more than {MAX_BACKFILL:,} occurrences, the most one "
                "backfill takes: ask for a shorter range",
            )
        if len(runs) < PREVIEW_PAGE:
            return slots
        after = runs[-1]
