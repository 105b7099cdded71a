"""Queue and dead-letter commands of schedctl: `queues ls`, `deadletters ls|show|redrive|purge`.

They call the API's queue and dead-letter routes over HTTP and print the answers.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import click
import msgspec
from rich.text import Text

from schedd.cli.ctl import render
from schedd.cli.ctl.answers import Answer, all_pages, filled_page, raw_items
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.older_nodes import Queues
from schedd.cli.ctl.render import json_option, page_options
from schedd.errors import InvalidRequest, SchedError
from schedd.jsonbody import JSONValue
from schedd.wire.deadletters import GROUPED, DeadLetterList, DeadLetterView, ErrorGroups
from schedd.wire.errors import ErrorDetail
from schedd.wire.queues import ConsumerView

DEADLETTER_JSON = "the API's dead letter object"


def deadletter_path(dl_id: str) -> str:
    """The route of one dead letter (its id holds a ':', quoted like any other character)."""
    return "/v1/deadletters/" + urllib.parse.quote(dl_id, safe="")


@click.group()
def queues() -> None:
    """Inspect the tenant's built-in queues."""


@queues.command(
    "ls",
    epilog="""\b
Examples:
  schedctl queues ls
  schedctl queues ls --json | jq '.queues[] | select(.dead > 0) | .name'
  schedctl queues ls --json | jq '.queues[] | {name, consumers: [.consumers[].consumer]}'""",
)
@json_option(
    '{"queues": [{"name", "ready", "in_flight", "delayed", "dead", "oldest_age_s", '
    '"consumers": [{"consumer", "last_seen", "node"}]}, ...], "partial": false}'
)
@click.pass_obj
def list_queues(client: Client, as_json: bool) -> None:
    """List queues with their ready, in-flight, delayed (retry backoff) and dead counts, the
    age of their oldest message and the consumers seen in the last 5 minutes."""
    answer = client.answer(Queues, "GET", "/v1/queues")
    if as_json:
        render.print_json(answer.raw)
        return
    if answer.view.partial:
        render.note("a node did not answer: consumers it saw are missing")
    if not answer.view.queues:
        render.note("no queues")
        return
    rows = [
        (
            queue.name,
            *(str(count) for count in (queue.ready, queue.in_flight, queue.delayed, queue.dead)),
            _age(queue.oldest_age_s),
            _consumers(queue.consumers),
        )
        for queue in answer.view.queues
    ]
    headers = ("QUEUE", "READY", "IN FLIGHT", "DELAYED", "DEAD", "OLDEST", "CONSUMERS")
    render.print_table(headers, rows)


@click.group()
def deadletters() -> None:
    """List, inspect, redrive and purge dead letters: runs whose last attempt failed."""


@deadletters.command(
    "ls",
    epilog="""\b
Examples:
  schedctl deadletters ls
  schedctl deadletters ls --all --json | jq -r '.deadletters[].id'
  schedctl deadletters ls --group-by error
  schedctl deadletters ls --fingerprint 3f2a9c0b1d4e5f60 --all

\b
--group-by error groups the newest 10,000 dead letters by error fingerprint
(numbers, ids and addresses masked), largest group first: --limit groups.
--fingerprint makes the server read at most 10,000 dead letters per request:
ls asks again until it has --limit of them or none are left.""",
)
@page_options
@click.option(
    "--group-by",
    type=click.Choice(["error"]),
    help="Show groups of alike errors (count, first and last seen, an example) instead.",
)
@click.option(
    "--fingerprint",
    metavar="F",
    help="Only the dead letters of group F (a fingerprint --group-by error printed).",
)
@json_option(
    '{"deadletters": [...], "next_cursor": ...}; with --group-by: '
    '{"groups": [{"fingerprint", "example", "count", "first_at", "last_at"}], "partial"}'
)
@click.pass_obj
def list_deadletters(
    client: Client,
    limit: int,
    cursor: str | None,
    is_all: bool,
    group_by: str | None,
    fingerprint: str | None,
    as_json: bool,
) -> None:
    """List dead letters in id order, a page at a time (or --all), or grouped by error."""
    if group_by is not None:
        if cursor or is_all or fingerprint:
            raise InvalidRequest("--group-by", "takes --limit only (no pages, no --fingerprint)")
        _show_groups(
            client.answer(
                ErrorGroups, "GET", "/v1/deadletters", query={"group_by": group_by, "limit": limit}
            ),
            as_json=as_json,
        )
        return

    def fetch(after: str | None, count: int = limit) -> Answer[DeadLetterList]:
        return _deadletters(client, after, count, fingerprint)

    if is_all:
        page = all_pages(fetch, "deadletters", cursor)
    else:
        page = filled_page(fetch, "deadletters", cursor, limit)
    if as_json:
        render.print_json(page.raw)
        return
    # The id starts with the job id and ends with the run's time; `show` gives every field.
    rows = [
        (
            item.id,
            str(item.attempts),
            render.describe_target(item.target),
            _first_line(item.error),
        )
        for item in page.view.deadletters
    ]
    if rows:
        render.print_table(("ID", "TRIES", "TARGET", "ERROR"), rows)
    else:
        render.note("no dead letters")
    if page.view.next_cursor:
        render.note(f"more dead letters: add --cursor {page.view.next_cursor}, or --all")


def _show_groups(answer: Answer[ErrorGroups], *, as_json: bool) -> None:
    if as_json:
        render.print_json(answer.raw)
        return
    rows = [
        (g.fingerprint, str(g.count), g.first_at, g.last_at, _first_line(g.example, 60))
        for g in answer.view.groups
    ]
    if rows:
        headers = ("FINGERPRINT", "COUNT", "FIRST (UTC)", "LAST (UTC)", "EXAMPLE")
        render.print_table(headers, rows)
    else:
        render.note("no dead letters")
    if answer.view.partial:
        render.note(f"only the newest {GROUPED:,} dead letters were grouped")


def _deadletters(
    client: Client, cursor: str | None, limit: int, fingerprint: str | None = None
) -> Answer[DeadLetterList]:
    query = {"cursor": cursor, "limit": limit, "fingerprint": fingerprint}
    return client.answer(DeadLetterList, "GET", "/v1/deadletters", query=query)


@deadletters.command(
    "show",
    epilog="\b\nExamples:\n  schedctl deadletters show 'job_0123abcd:2026-11-30T08:00:00Z' --json",
)
@click.argument("deadletter_id", metavar="ID")
@json_option(DEADLETTER_JSON)
@click.pass_obj
def show_deadletter(client: Client, deadletter_id: str, as_json: bool) -> None:
    """Show dead letter ID with its whole last error."""
    answer = client.answer(DeadLetterView, "GET", deadletter_path(deadletter_id))
    if as_json:
        render.print_json(answer.raw)
        return
    item = answer.view
    rows = [
        ("id", item.id),
        ("job_id", item.job_id),
        ("scheduled", item.scheduled_at),
        ("attempts", str(item.attempts)),
        ("target", render.describe_target(item.target)),
        ("dead since", item.created_at),
        ("error", item.error or "-"),
    ]
    render.print_fields(rows)


@deadletters.command(
    "redrive",
    epilog="""\b
Examples:
  schedctl deadletters redrive 'job_0123abcd:1796028778162'
  schedctl deadletters redrive ID1 ID2 ID3
  schedctl deadletters redrive --all
  schedctl deadletters redrive --fingerprint 3f2a9c0b1d4e5f60""",
)
@click.argument("deadletter_ids", metavar="[ID]...", nargs=-1)
@click.option(
    "--all",
    "is_all",
    is_flag=True,
    help="Redrive every dead letter of the tenant, a page at a time.",
)
@click.option(
    "--fingerprint",
    metavar="F",
    help="Redrive every dead letter of group F (ls --group-by error), a page at a time.",
)
@json_option('{"id": ..., "status": "redriven"} for one ID, else {"results": [...]}')
@click.pass_obj
def redrive(
    client: Client,
    deadletter_ids: tuple[str, ...],
    is_all: bool,
    fingerprint: str | None,
    as_json: bool,
) -> None:
    """Give the runs of the dead letters named one new attempt each; each dead letter is
    removed. Several IDs (or --all, or --fingerprint) go 500 at a time through POST
    /v1/deadletters:redrive; any id not redriven makes the exit code 1. A batch refused as a
    whole (503, 507, timeout) stops the run: every id's result is printed, and the exit code is
    that error's (3)."""
    if [bool(deadletter_ids), is_all, fingerprint is not None].count(True) != 1:
        raise InvalidRequest(
            "ID", "give one or more dead letter ids, or --all, or --fingerprint (one of them)"
        )
    if len(deadletter_ids) == 1:
        (deadletter_id,) = deadletter_ids
        answer = client.request("POST", deadletter_path(deadletter_id) + "/redrive")
        answer = answer or {"id": deadletter_id, "status": "redriven"}
        if as_json:
            render.print_json(answer)
        else:
            render.console().print(Text(f"{deadletter_id}: redriven, one new attempt queued"))
        return
    ids = deadletter_ids or _all_deadletter_ids(client, fingerprint)
    redrives = _redrive_batches(client, ids)
    results, stopped_by = redrives.results, redrives.stopped_by
    failed = [(r.id, r.error) for r in results if r.error is not None]
    if as_json:
        render.print_json({"results": redrives.raw})
    else:
        for dl_id, error in failed:
            render.note(f"{dl_id}: not redriven: {error.message}")
        render.note(f"redriven: {len(results) - len(failed)}, not redriven: {len(failed)}")
    counts = f"{len(failed)} of {len(results)} dead letters were not redriven"
    if stopped_by is not None:  # exits as that error would have (3 for a 503, 507, timeout)
        raise NotAllRedriven(f"{stopped_by} ({counts})", exit_code=stopped_by.exit_code)
    if failed:
        raise NotAllRedriven(counts)


REDRIVE_BATCH = 500  # the API's limit per POST /v1/deadletters:redrive
REDRIVE_PATH = "/v1/deadletters:redrive"


class NotAllRedriven(SchedError):
    code = "not_all_redriven"
    exit_code = 1

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _all_deadletter_ids(client: Client, fingerprint: str | None = None) -> Iterator[str]:
    """Every dead letter's id (of group `fingerprint` only, if given), a page at a time (the
    caller lists them all before redriving any: a run that fails again at once is a new dead
    letter, not redriven twice)."""
    cursor: str | None = None
    while True:
        page = _deadletters(client, cursor, REDRIVE_BATCH, fingerprint).view
        yield from (item.id for item in page.deadletters)
        cursor = page.next_cursor
        if not cursor:
            return


@dataclass
class Redrives:
    """Every id's result in order: as the nodes answered (`raw`) and read; and the error that
    stopped the run, if any."""

    raw: list[JSONValue] = field(default_factory=list)
    results: list[RedriveResult] = field(default_factory=list)
    stopped_by: SchedError | None = None

    def add(self, failed: list[RedriveResult]) -> None:
        self.raw += [msgspec.to_builtins(result) for result in failed]
        self.results += failed


def _redrive_batches(client: Client, ids: Iterable[str]) -> Redrives:
    """POST the ids REDRIVE_BATCH at a time (progress on stderr). A batch refused as a whole
    (503, 507, a timeout, ...) stops the run: that batch's ids answer the error, the later
    ones are not sent."""
    done = Redrives()
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), REDRIVE_BATCH):
        batch: list[JSONValue] = list(unique[start : start + REDRIVE_BATCH])
        try:
            answer = client.answer(RedriveResults, "POST", REDRIVE_PATH, {"ids": batch})
        except SchedError as exc:
            unsent = f"not sent: an earlier batch failed: {exc}"
            done.add([_failed(str(dl_id), exc, str(exc)) for dl_id in batch])
            done.add([_failed(dl_id, exc, unsent) for dl_id in unique[start + len(batch) :]])
            done.stopped_by = exc
            return done
        done.raw += raw_items(answer, "results")
        done.results += answer.view.results
        if len(batch) == REDRIVE_BATCH:
            render.note(f"... {len(done.results)} sent")
    return done


class RedriveResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One id's result in POST /v1/deadletters:redrive's answer: wire's Redriven or
    NotRedriven, read as one struct (msgspec decodes no union of two untagged structs)."""

    id: str
    redriven: bool = False
    error: ErrorDetail | None = None


class RedriveResults(msgspec.Struct, frozen=True, kw_only=True):
    results: list[RedriveResult]


def _failed(dl_id: str, exc: SchedError, message: str) -> RedriveResult:
    return RedriveResult(id=dl_id, error=ErrorDetail(code=exc.code, message=message))


@deadletters.command(
    "purge",
    epilog="""\b
Examples:
  schedctl deadletters purge 'job_0123abcd:2026-11-30T08:00:00Z'
  schedctl deadletters ls --all --json | jq -r '.deadletters[].id' \\
    | xargs -n1 schedctl deadletters purge""",
)
@click.argument("deadletter_id", metavar="ID")
@json_option('{"id": ..., "status": "purged"}')
@click.pass_obj
def purge(client: Client, deadletter_id: str, as_json: bool) -> None:
    """Delete dead letter ID for good; prints nothing unless --json."""
    client.request("DELETE", deadletter_path(deadletter_id))
    if as_json:
        render.print_json({"id": deadletter_id, "status": "purged"})


def _first_line(text: str | None, limit: int = 80) -> str:
    line = ((text or "").strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _age(seconds: float | None) -> str:
    """'-' without a message; else the age in its two largest units: 45s, 12m5s, 3h20m, 2d4h."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    for size, unit, smaller, rest in ((86_400, "d", 3_600, "h"), (3_600, "h", 60, "m")):
        if whole >= size:
            return f"{whole // size}{unit}{whole % size // smaller}{rest}"
    return f"{whole // 60}m{whole % 60}s" if whole >= 60 else f"{whole}s"


def _consumers(seen: list[ConsumerView], shown: int = 3) -> str:
    """The distinct consumer names, the first few of them."""
    names = list(dict.fromkeys(item.consumer for item in seen))
    more = f" +{len(names) - shown} more" if len(names) > shown else ""
    return (", ".join(names[:shown]) + more) or "-"


COMMANDS = (queues, deadletters)
