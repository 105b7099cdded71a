"""`schedctl import-crontab`: each crontab line becomes a recurring job on a queue, which
`schedctl work QUEUE --shell` then runs.

Crontab's own rules, as far as they carry over: `CRON_TZ=` and `TZ=` set the zone of the lines
after them; other `NAME=value` lines do not apply (reported); `@reboot` has no equivalent; a
missed run is not caught up (misfire policy `skip`), and runs may overlap, as under cron.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import click
from rich.progress import Progress
from rich.text import Text

from schedd.cli.ctl import render
from schedd.cli.ctl.answers import Answer, all_pages
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.render import json_option
from schedd.cron import parse_cron
from schedd.errors import InvalidRequest
from schedd.jobspec import QUEUE_NAME
from schedd.jsonbody import JSONValue
from schedd.schedule import zone_hint
from schedd.timeformat import parse_instant
from schedd.wire.jobs import JobList, JobView

_ENV_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)")
_UNESCAPED_PERCENT = re.compile(r"(?<!\\)%")
_NOT_APPLICABLE = {
    "MAILTO": "schedd sends no mail: failed runs become dead letters (schedctl deadletters ls)",
    "SHELL": "commands run with /bin/sh -c under `schedctl work --shell`",
    "PATH": "commands run with the PATH of the `schedctl work` process",
}
PROGRESS_ABOVE = 20  # lines to create before a progress bar is worth showing


@dataclass(frozen=True, slots=True)
class Entry:
    """One crontab line that becomes a job."""

    line: int
    cron: str
    timezone: str
    command: str

    def key(self, queue: str) -> str:
        """The Idempotency-Key: the same line (zone, queue) never makes two jobs."""
        text = json.dumps([queue, self.timezone, self.cron, self.command])
        return "crontab-" + hashlib.sha256(text.encode()).hexdigest()[:40]

    def body(self, queue: str) -> dict[str, JSONValue]:
        return {
            "name": f"crontab: {self.command}"[:200],
            "schedule": {"cron": self.cron, "timezone": self.timezone},
            "target": {"type": "queue", "name": queue},
            "payload": {"command": self.command},
            "misfire_policy": "skip",  # cron does not catch up runs missed while it was down
        }


@dataclass(frozen=True, slots=True)
class Imported:
    """A line that has its job: made now, or found made before."""

    line: int
    cron: str
    timezone: str
    command: str
    job_id: str

    @classmethod
    def of(cls, entry: Entry, job_id: str) -> Imported:
        return cls(entry.line, entry.cron, entry.timezone, entry.command, job_id)


@dataclass(frozen=True, slots=True)
class Skipped:
    line: int
    text: str
    reason: str


@dataclass(slots=True)
class Crontab:
    entries: list[Entry] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def has_errors(self) -> bool:
        """Lines that could not be read (not @reboot, which is expected to stay behind)."""
        return any(not s.reason.startswith("@reboot") for s in self.skipped)


def parse_crontab(text: str, *, timezone: str) -> Crontab:
    """Read a user crontab (five time fields and a command per line)."""
    result = Crontab()
    zone: str | None = timezone
    zone_error = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        env = _ENV_LINE.fullmatch(line)
        if env is not None:
            name, value = env.group(1), _unquote(env.group(2))
            if name in ("CRON_TZ", "TZ"):
                zone, zone_error = _zone(value), f"{name}={value} is not a known time zone"
            else:
                why = _NOT_APPLICABLE.get(name, "the command does not get crontab variables")
                result.warnings.append(f"line {number}: {name}= does not apply: {why}")
            continue
        if zone is None:
            result.skipped.append(Skipped(number, line, zone_error))
            continue
        parsed = _entry(number, line, zone)
        if isinstance(parsed, Skipped):
            result.skipped.append(parsed)
        else:
            result.entries.append(parsed)
    return result


def _entry(number: int, line: str, zone: str) -> Entry | Skipped:
    if line.startswith("@"):
        macro, _, command = line.partition(" ")
        if macro.lower() == "@reboot":
            return Skipped(number, line, "@reboot: schedd has no boot event to run it on")
        cron = macro
    else:
        parts = line.split(None, 5)
        if len(parts) < 6:
            return Skipped(number, line, "expected five time fields and a command")
        cron, command = " ".join(parts[:5]), parts[5]
    command = command.strip()
    if not command:
        return Skipped(number, line, "no command")
    if _UNESCAPED_PERCENT.search(command):
        return Skipped(number, line, "a % in a crontab command feeds stdin: not supported")
    try:
        parse_cron(cron)
    except InvalidRequest as exc:
        return Skipped(number, line, exc.reason)
    return Entry(number, cron, zone, command.replace("\\%", "%"))


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _zone(name: str) -> str | None:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
    return name


def _existing(client: Client, queue: str) -> dict[str, str]:
    """Idempotency beyond the server's key window: live jobs already made from these lines."""
    found: dict[str, str] = {}
    for status in ("active", "paused"):

        def fetch(cursor: str | None, status: str = status) -> Answer[JobList]:
            return client.list_jobs(status=status, cursor=cursor, limit=1000)

        for job in all_pages(fetch, "jobs").view.jobs:
            schedule, target, payload = job.schedule, job.target, job.payload
            if target.get("name") != queue or not isinstance(payload, dict):
                continue
            if "cron" in schedule and isinstance(payload.get("command"), str):
                entry = Entry(
                    0, schedule["cron"], schedule.get("timezone", "UTC"), payload["command"]
                )
                found[entry.key(queue)] = job.job_id
    return found


@click.command("import-crontab")
@click.argument("source", type=click.File("r"), metavar="FILE|-")
@click.option(
    "--tz",
    "--timezone",
    "timezone",
    default="UTC",
    show_default=True,
    metavar="ZONE",
    help="Zone of the lines before any CRON_TZ= or TZ= line.",
)
@click.option(
    "--queue",
    default="crontab",
    show_default=True,
    metavar="NAME",
    help="Queue the jobs deliver to (run it with `schedctl work NAME --shell`).",
)
@click.option("--dry-run", is_flag=True, help="Show what would be created; send nothing.")
@json_option("one JSON object: created, existing, skipped, warnings, work_command")
@click.pass_obj
def import_crontab(
    client: Client, source: Any, timezone: str, queue: str, dry_run: bool, as_json: bool
) -> None:
    """Turn each line of a crontab FILE (or - for stdin) into a recurring job.

    Importing the same file again creates nothing new. Exit 2 if a line could not be read
    (the others are imported)."""
    if not QUEUE_NAME.fullmatch(queue):
        raise InvalidRequest("--queue", f"must match [A-Za-z0-9_.-]{{1,128}}, got {queue!r}")
    if _zone(timezone) is None:
        raise InvalidRequest(
            "--tz", f"{timezone!r} is not a known IANA time zone{zone_hint(timezone)}"
        )
    crontab = parse_crontab(source.read(), timezone=timezone)
    created: list[Imported] = []
    existing: list[Imported] = []
    if not dry_run and crontab.entries:
        created, existing = _create(client, crontab.entries, queue, show=not as_json)
    work_command = f"schedctl work {queue} --shell"
    if as_json:
        render.print_json(
            {
                "dry_run": dry_run,
                "would_create": [asdict(e) for e in crontab.entries] if dry_run else [],
                "created": [asdict(row) for row in created],
                "existing": [asdict(row) for row in existing],
                "skipped": [asdict(s) for s in crontab.skipped],
                "warnings": crontab.warnings,
                "work_command": work_command,
            }
        )
    else:
        _show(crontab, created, existing, dry_run=dry_run, work_command=work_command)
    if crontab.has_errors:
        sys.exit(2)


def _create(
    client: Client, entries: list[Entry], queue: str, *, show: bool
) -> tuple[list[Imported], list[Imported]]:
    known = _existing(client, queue)
    created: list[Imported] = []
    existing: list[Imported] = []
    with Progress(
        console=render.console(stderr=True),
        transient=True,
        disable=not show or len(entries) <= PROGRESS_ABOVE,
    ) as progress:
        task = progress.add_task("importing", total=len(entries))
        for entry in entries:
            key = entry.key(queue)
            if key in known:
                existing.append(Imported.of(entry, known[key]))
            else:
                started = time.time()
                job = client.create_job(entry.body(queue), idempotency_key=key).view
                # A replay of the key answers with the job made before: not created now.
                is_new = _created_at_s(job) >= started - 1.0
                (created if is_new else existing).append(Imported.of(entry, job.job_id))
            progress.advance(task)
    return created, existing


def _created_at_s(job: JobView) -> float:
    return parse_instant(job.created_at, field="created_at") / 1000


def _show(
    crontab: Crontab,
    created: list[Imported],
    existing: list[Imported],
    *,
    dry_run: bool,
    work_command: str,
) -> None:
    console = render.console()
    if not crontab.entries and not crontab.skipped:
        render.note("no crontab lines read: the input was empty (or only comments)")
        return
    results = {row.line: ("created", "green") for row in created}
    results |= {row.line: ("exists already", "dim") for row in existing}
    rows: list[tuple[int, str, str, str, Text]] = []
    for entry in crontab.entries:
        result, style = ("would create", "cyan") if dry_run else results.get(entry.line, ("", ""))
        rows.append(
            (entry.line, entry.cron, entry.timezone, entry.command, Text(result, style=style))
        )
    for skipped in crontab.skipped:
        reason = Text(f"not imported: {skipped.reason}", style="red")
        rows.append((skipped.line, "", "", skipped.text, reason))
    rows.sort(key=lambda row: row[0])
    render.print_table(
        ("LINE", "SCHEDULE", "ZONE", "COMMAND", "RESULT"),
        [(str(line), cron, zone, command, shown) for line, cron, zone, command, shown in rows],
    )
    for warning in crontab.warnings:
        render.note(warning)
    if crontab.entries and not dry_run:
        console.print(f"{len(created)} created, {len(existing)} existed already. Run them with:")
        console.print(Text(f"  {work_command}", style="bold"))
    elif dry_run:
        console.print("Dry run: nothing sent. After the import, run them with:")
        console.print(Text(f"  {work_command}", style="bold"))
