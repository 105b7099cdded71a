"""`schedctl import-crontab`: each crontab line (of a file, or of a whole machine) becomes a
recurring job on a queue, its payload what `schedctl work QUEUE --shell` needs to run the line as
cron would: command, user, variables, stdin. Reading is crontab_file.py's and
crontab_machine.py's; this module makes the jobs (PUT by a key per line) and reports.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.progress import Progress
from rich.text import Text

from schedd.cli.ctl import render
from schedd.cli.ctl.answers import Answer, all_pages
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.crontab_file import Crontab, Entry, Note, Skipped, known_zone
from schedd.cli.ctl.crontab_machine import Reading, read_crontabs
from schedd.cli.ctl.render import json_option
from schedd.errors import Conflict, InvalidRequest, NotFound
from schedd.jobspec import QUEUE_NAME
from schedd.jsonbody import JSONValue
from schedd.schedule import zone_hint
from schedd.wire.jobs import JobList

PROGRESS_ABOVE = 20  # lines to create before a progress bar is worth showing
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_USER_NAME = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*\$?")


@dataclass(frozen=True, slots=True, kw_only=True)
class Planned:
    """An entry with the key and the body of its job."""

    entry: Entry
    key: str
    body: dict[str, JSONValue]
    file_key: str  # the key before a user crontab's followed its user, not its file

    def row(self) -> dict[str, JSONValue]:
        """The entry as --json shows it."""
        entry = self.entry
        return {
            "file": entry.file,
            "line": entry.line,
            "cron": entry.cron,
            "timezone": entry.timezone,
            "user": entry.user,
            "command": entry.command,
            "stdin": entry.stdin,
            "env": dict(entry.env),
            "mailto": entry.mailto,
            "misfire_policy": self.body["misfire_policy"],
            "on_failure": self.body.get("on_failure"),
            "key": self.key,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Imported:
    """A planned job as the node has it now: created, updated (a line moved, an option
    changed) or existing as it was."""

    planned: Planned
    job_id: str
    result: str


def plan(
    entries: list[Entry], queue: str, *, is_anacron: bool, mailto_alerts: str | None
) -> list[Planned]:
    """Each entry's job. Its key follows the queue, the crontab (a user's: its user, however it
    was read), and the line's user, schedule, zone, command and stdin (and which of identical
    lines it is): importing again finds it, wherever the line moved in the file, and PUTs the
    rest (variables, options) over it."""
    seen: Counter[str] = Counter()
    planned: list[Planned] = []
    for entry in entries:
        key = _key(queue, entry.crontab, entry, seen)
        file_key = key if entry.crontab == entry.file else _key(queue, entry.file, entry, seen)
        seen[_identity(queue, entry.crontab, entry)] += 1
        body = job_body(entry, queue, key, is_anacron=is_anacron, mailto_alerts=mailto_alerts)
        planned.append(Planned(entry=entry, key=key, body=body, file_key=file_key))
    return planned


def _identity(queue: str, crontab: str, entry: Entry) -> str:
    return json.dumps(
        [queue, crontab, entry.user, entry.cron, entry.timezone, entry.command, entry.stdin]
    )


def _key(queue: str, crontab: str, entry: Entry, seen: Counter[str]) -> str:
    """The key of the entry read from `crontab`; `seen` counts the identical lines before it."""
    count = seen[_identity(queue, entry.crontab, entry)]
    digest = hashlib.sha256(f"{_identity(queue, crontab, entry)}{count}".encode()).hexdigest()
    return f"crontab:{queue}:{digest[:40]}"


def job_body(
    entry: Entry, queue: str, key: str, *, is_anacron: bool, mailto_alerts: str | None
) -> dict[str, JSONValue]:
    """The full job (a PUT by key replaces every field)."""
    payload: dict[str, JSONValue] = {
        "command": entry.command,
        "user": entry.user,
        "env": dict(entry.env),
        "source": entry.source,
    }
    if entry.stdin is not None:
        payload["stdin"] = entry.stdin
    if entry.mailto is not None:
        payload["mailto"] = entry.mailto
    labels: dict[str, JSONValue] = {
        "crontab.file": _label(entry.file),
        "crontab.line": str(entry.line),
    }
    if entry.user is not None:
        labels["crontab.user"] = _label(entry.user)
    body: dict[str, JSONValue] = {
        "name": _CONTROL.sub(" ", f"crontab: {entry.command}")[:200],
        "key": key,
        "labels": labels,
        "schedule": {"cron": entry.cron, "timezone": entry.timezone},
        "target": {"type": "queue", "name": queue},
        "payload": payload,
        # cron does not catch up runs missed while it was down; anacron runs them once
        "misfire_policy": "run_once" if entry.is_anacron or is_anacron else "skip",
    }
    if mailto_alerts is not None and entry.mailto != "":  # where cron would have mailed
        body["on_failure"] = {"alert_url": mailto_alerts, "after": 1}
    return body


def _label(value: str) -> str:
    return _CONTROL.sub("?", value)[-200:]


def _existing(client: Client, queue: str) -> dict[tuple[str, str, str], str]:
    """Jobs an import-crontab made before issue 34 (no key, payload {"command"} only): the
    first import now takes each over (its key set, then the PUT), so none runs twice."""
    found: dict[tuple[str, str, str], str] = {}
    for status in ("active", "paused"):

        def fetch(cursor: str | None, status: str = status) -> Answer[JobList]:
            return client.list_jobs(status=status, cursor=cursor, limit=1000)

        for job in all_pages(fetch, "jobs").view.jobs:
            schedule, target, payload = job.schedule, job.target, job.payload
            if job.key is not None or target.get("name") != queue or "cron" not in schedule:
                continue
            if isinstance(payload, dict) and list(payload) == ["command"]:
                command = payload["command"]
                if isinstance(command, str):
                    zone = schedule.get("timezone", "UTC")
                    found.setdefault((schedule["cron"], zone, command), job.job_id)
    return found


@click.command(
    "import-crontab",
    epilog="""\b
Examples:
  crontab -l | schedctl import-crontab - --tz Europe/Paris --queue host1-cron
  schedctl import-crontab /etc/cron.d/e2scrub_all --queue host1-cron --dry-run
  sudo schedctl import-crontab --machine --users --queue host1-cron""",
)
@click.argument("source", required=False, type=click.File("r"), metavar="[FILE|-]")
@click.option(
    "--machine",
    "is_machine",
    is_flag=True,
    help="Instead of FILE: /etc/crontab and the files of /etc/cron.d that cron reads.",
)
@click.option(
    "--users",
    "has_users",
    is_flag=True,
    help="With --machine: each user's crontab too (crontab -l -u NAME).",
)
@click.option(
    "--system/--no-system",
    "is_system",
    default=None,
    help="FILE has a user field after the time fields [default: for /etc/crontab and "
    "/etc/cron.d/*].",
)
@click.option("--user", metavar="NAME", help="The user a user crontab's lines run as.")
@click.option(
    "--tz",
    "--timezone",
    "timezone",
    metavar="ZONE",
    help="Zone of the lines before any CRON_TZ= line [default: UTC; with --machine, the "
    "machine's]. TZ= lines set the commands' variable only, as in cron.",
)
@click.option(
    "--queue",
    default="crontab",
    show_default=True,
    metavar="NAME",
    help="Queue the jobs deliver to (run it with `schedctl work NAME --shell`).",
)
@click.option(
    "--mailto-alerts",
    metavar="URL",
    help="Alert URL on a failed run, for the lines cron would mail about.",
)
@click.option(
    "--expand-run-parts",
    "is_expanding",
    is_flag=True,
    help="One job per script of the /etc/cron.* directory a line's run-parts runs.",
)
@click.option(
    "--anacron",
    "is_anacron",
    is_flag=True,
    help="Run a run missed while the cluster was down once when it is back, as anacron.",
)
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default="/",
    hidden=True,  # tests: the machine's root directory
)
@click.option("--dry-run", is_flag=True, help="Show what would be created; send nothing.")
@json_option("one JSON object: created, updated, existing, skipped, warnings, work_command")
@click.pass_obj
def import_crontab(client: Client, /, **options: Any) -> None:
    """Turn each line of a crontab FILE (or - for stdin), or of this machine, into a recurring
    job.

    Importing again creates nothing new. Exit 2 if a line could not be read (the others are
    imported)."""
    queue, dry_run, as_json = options["queue"], options["dry_run"], options["as_json"]
    reading = _check(options)
    is_anacron, mailto_alerts = options["is_anacron"], options["mailto_alerts"]
    crontab = read_crontabs(reading)
    planned = plan(crontab.entries, queue, is_anacron=is_anacron, mailto_alerts=mailto_alerts)
    imported: list[Imported] = []
    if not dry_run and planned:
        imported = _create(client, planned, queue, crontab, show=not as_json)
    work_command = _work_command(queue, planned)
    is_multi = reading.is_machine
    if as_json:
        render.print_json(
            {
                "dry_run": dry_run,
                "would_create": [p.row() for p in planned] if dry_run else [],
                **{
                    result: [_imported_row(row) for row in imported if row.result == result]
                    for result in ("created", "updated", "existing")
                },
                "skipped": [_skipped_row(s) for s in crontab.skipped],
                "warnings": _warnings(crontab, is_multi=is_multi),
                "work_command": work_command,
            }
        )
    else:
        _show(
            crontab,
            planned,
            imported,
            dry_run=dry_run,
            work_command=work_command,
            is_multi=is_multi,
        )
    if crontab.has_errors:
        sys.exit(2)


def _check(options: dict[str, Any]) -> Reading:
    """The options, checked before anything is read or sent."""
    source, is_machine = options["source"], options["is_machine"]
    if (source is None) == (not is_machine):
        raise InvalidRequest("FILE", "give a crontab FILE (- for stdin) or --machine, not both")
    if options["has_users"] and not is_machine:
        raise InvalidRequest("--users", "goes with --machine")
    if is_machine and (options["user"] is not None or options["is_system"] is not None):
        raise InvalidRequest("--machine", "reads each crontab in its format: no --user, --system")
    user = options["user"]
    if user is not None and not _USER_NAME.fullmatch(user):
        raise InvalidRequest("--user", f"must be a user name, got {user!r}")
    if user is not None and options["is_system"]:
        raise InvalidRequest("--user", "a system crontab names each line's user")
    queue = options["queue"]
    if not QUEUE_NAME.fullmatch(queue):
        raise InvalidRequest("--queue", f"must match [A-Za-z0-9_.-]{{1,128}}, got {queue!r}")
    zone = options["timezone"]
    if zone is not None and known_zone(zone) is None:
        raise InvalidRequest("--tz", f"{zone!r} is not a known IANA time zone{zone_hint(zone)}")
    url = options["mailto_alerts"]
    if url is not None and not url.startswith(("http://", "https://")):
        raise InvalidRequest("--mailto-alerts", f"must be an http:// or https:// URL, got {url!r}")
    return Reading(
        source=source,
        is_machine=is_machine,
        has_users=options["has_users"],
        is_system=options["is_system"],
        user=user,
        timezone=zone,
        root=options["root"],
        mailto_alerts=url,
        is_expanding=options["is_expanding"],
    )


def _create(
    client: Client, planned: list[Planned], queue: str, crontab: Crontab, *, show: bool
) -> list[Imported]:
    earlier = _existing(client, queue)
    imported: list[Imported] = []
    with Progress(
        console=render.console(stderr=True),
        transient=True,
        disable=not show or len(planned) <= PROGRESS_ABOVE,
    ) as progress:
        task = progress.add_task("importing", total=len(planned))
        for row in planned:
            entry = row.entry
            job_id = earlier.pop((entry.cron, entry.timezone, entry.legacy_command or ""), None)
            if job_id is None and row.file_key != row.key:
                job_id = _keyed(client, row.file_key)
            if job_id is not None:
                _take_over(client, job_id, row, crontab)
            is_created, job = client.put_job_by_key(row.key, row.body)
            result = "created" if is_created else "updated" if job.get("changed") else "existing"
            imported.append(Imported(planned=row, job_id=str(job["job_id"]), result=result))
            progress.advance(task)
    return imported


def _keyed(client: Client, key: str) -> str | None:
    """The job of a key, if it has one (not cancelled)."""
    try:
        job = client.get_job_by_key(key).view
    except NotFound:
        return None
    return None if job.status == "cancelled" else job.job_id


def _take_over(client: Client, job_id: str, row: Planned, crontab: Crontab) -> None:
    """Give a job an earlier import-crontab made from this line the line's key."""
    try:
        client.update_job(job_id, {"key": row.key})
    except Conflict:  # the key has its job already: this one would run the line twice
        text = f"{job_id}, made by an earlier import-crontab, runs it too: schedctl cancel it"
        crontab.warnings.append(Note(row.entry.file, row.entry.line, text))


def _imported_row(row: Imported) -> dict[str, JSONValue]:
    return row.planned.row() | {"job_id": row.job_id}


def _skipped_row(skipped: Skipped) -> dict[str, JSONValue]:
    return {
        "file": skipped.file,
        "line": skipped.line,
        "text": skipped.text,
        "reason": skipped.reason,
        "is_error": skipped.is_error,
    }


def _where(file: str, line: int, *, is_multi: bool) -> str:
    if not is_multi:
        return f"line {line}" if line else file
    return f"{file}:{line}" if line else file


def _warnings(crontab: Crontab, *, is_multi: bool) -> list[str]:
    """The warnings in the order of the files and their lines."""
    rank = {file: index for index, file in enumerate(crontab.files)}
    notes = sorted(crontab.warnings, key=lambda n: (rank.get(n.file, -1), n.line))
    return [f"{_where(n.file, n.line, is_multi=is_multi)}: {n.text}" for n in notes]


def _flat(text: str) -> str:
    """A cell of the table: tabs and other control characters as spaces."""
    return _CONTROL.sub(" ", text)


_RESULTS = {
    "created": ("created", "green"),
    "updated": ("updated", "yellow"),
    "existing": ("exists already", "dim"),
}


def _work_command(queue: str, planned: list[Planned]) -> str:
    """The worker that runs the lines: as root (a line with a user needs it), allowed to run
    as each of their users (`schedctl work --allow-user`)."""
    users = sorted({p.entry.user for p in planned if p.entry.user is not None})
    if not users:
        return f"schedctl work {queue} --shell"
    allowed = " ".join(f"--allow-user {shlex.quote(user)}" for user in users)
    return f"sudo schedctl work {queue} --shell {allowed}"


def _show(
    crontab: Crontab,
    planned: list[Planned],
    imported: list[Imported],
    *,
    dry_run: bool,
    work_command: str,
    is_multi: bool,
) -> None:
    console = render.console()
    if not crontab.entries and not crontab.skipped:
        render.note("no crontab lines read: the input was empty (or only comments)")
        for warning in _warnings(crontab, is_multi=is_multi):
            render.note(warning)
        return
    render.print_table(
        ("LINE", "SCHEDULE", "ZONE", "USER", "COMMAND", "RESULT"),
        _rows(crontab, planned, imported, dry_run=dry_run, is_multi=is_multi),
    )
    for warning in _warnings(crontab, is_multi=is_multi):
        render.note(warning)
    if planned and not dry_run:
        counts = Counter(row.result for row in imported)
        console.print(
            f"{counts['created']} created, {counts['updated']} updated, "
            f"{counts['existing']} existed already. Run them with:"
        )
        console.print(Text(f"  {work_command}", style="bold"))
    elif dry_run:
        console.print("Dry run: nothing sent. After the import, run them with:")
        console.print(Text(f"  {work_command}", style="bold"))


_Row = tuple[str, str, str, str, str, Text]


def _rows(
    crontab: Crontab,
    planned: list[Planned],
    imported: list[Imported],
    *,
    dry_run: bool,
    is_multi: bool,
) -> list[_Row]:
    """The table's rows: each line planned and each skipped, in the order of the files."""
    results = {row.planned.key: _RESULTS[row.result] for row in imported}
    rank = {file: index for index, file in enumerate(crontab.files)}
    rows: list[tuple[tuple[int, int], _Row]] = []
    for row in planned:
        entry = row.entry
        result, style = ("would create", "cyan") if dry_run else results.get(row.key, ("", ""))
        command = entry.command if entry.stdin is None else f"{entry.command} %..."
        where = _where(entry.file, entry.line, is_multi=is_multi).removeprefix("line ")
        shown = (where, entry.cron, entry.timezone, entry.user or "-", _flat(command))
        rows.append(((rank.get(entry.file, len(rank)), entry.line), (*shown, Text(result, style))))
    for skipped in crontab.skipped:
        style = "red" if skipped.is_error else "dim"
        where = _where(skipped.file, skipped.line, is_multi=is_multi).removeprefix("line ")
        reason = Text(f"not imported: {skipped.reason}", style=style)
        rank_of = (rank.get(skipped.file, len(rank)), skipped.line)
        rows.append((rank_of, (where, "", "", "", _flat(skipped.text), reason)))
    rows.sort(key=lambda row: row[0])
    return [shown for _, shown in rows]
