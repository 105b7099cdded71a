"""`schedctl history`: a job's versions (GET /v1/jobs/{id}/versions), newest first, and with
--diff what each changed from the one before it."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import click
from rich.text import Text

from schedd.cli.ctl import render
from schedd.cli.ctl.answers import Answer, all_pages
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.render import json_option, page_options
from schedd.wire.jobs import JobVersionView, VersionList

# The job's status after a change of each kind; an update leaves it as it was.
STATUS_AFTER = {"create": "active", "pause": "paused", "resume": "active", "cancel": "cancelled"}


@click.command(
    epilog="""\b
Examples:
  schedctl history job_0123abcd
  schedctl history job_0123abcd --diff
  schedctl history job_0123abcd --all --json

\b
VERSION counts the job's changes (1: created); the job object's "version" is
another number, which every claimed run raises too. Versions are kept as long
as the audit trail ([retention] audit) after the next change replaced them.""",
)
@click.argument("job_id")
@click.option(
    "--diff",
    "has_diff",
    is_flag=True,
    help="Under each version, what changed from the one before it: FIELD: OLD -> NEW.",
)
@page_options
@json_option('{"versions": [...], "next_cursor": ...}')
@click.pass_obj
def history(
    client: Client,
    job_id: str,
    has_diff: bool,
    limit: int,
    cursor: str | None,
    is_all: bool,
    as_json: bool,
) -> None:
    """List the versions of JOB_ID, newest first: each create, update, reschedule, pause,
    resume and cancel, who made it and when."""

    def fetch(after: str | None) -> Answer[VersionList]:
        return client.list_versions(job_id, cursor=after, limit=limit)

    page = all_pages(fetch, "versions", cursor) if is_all else fetch(cursor)
    if as_json:
        render.print_json(page.raw)
        return
    versions = page.view.versions
    if has_diff:
        for line in diff_lines(versions):
            render.console().print(line)
        if page.view.next_cursor:
            render.note(f"more versions: add --cursor {page.view.next_cursor}, or --all")
        return
    headers = ("VERSION", "CHANGED AT (UTC)", "CHANGE", "BY", "FIELDS")
    rows = [
        (
            str(v.version),
            v.changed_at,
            v.change,
            v.changed_by or "-",
            ", ".join(v.fields) if v.fields else "-",
        )
        for v in versions
    ]
    render.print_page(headers, rows, page.view.next_cursor, "versions")


def diff_lines(versions: Sequence[JobVersionView]) -> Iterator[Text]:
    """Per version (newest first), a heading and what changed from the version before it in
    the list: each spec field that differs, and the status a pause, resume or cancel set."""
    statuses = _statuses(versions)
    for i, version in enumerate(versions):
        by = f", by {version.changed_by}" if version.changed_by else ""
        yield Text(f"version {version.version}: {version.change} at {version.changed_at}{by}")
        older = versions[i + 1] if i + 1 < len(versions) else None
        for line in _changes(version, older, statuses):
            yield Text(f"  {line}")


def _changes(
    version: JobVersionView, older: JobVersionView | None, statuses: dict[int, str | None]
) -> Iterator[str]:
    if version.change in STATUS_AFTER and version.change != "create":
        before = statuses.get(older.version) if older is not None else None
        yield f"status: {before or '?'} -> {STATUS_AFTER[version.change]}"
    if older is None:
        if version.change != "create":
            yield "(the version before is not listed)"
        return
    if version.spec is None or older.spec is None:
        if version.change in ("update", "reschedule"):
            yield f"{', '.join(version.fields or ())}: (spec not recorded)"
        return
    for field in [*version.spec, *(f for f in older.spec if f not in version.spec)]:
        old, new = older.spec.get(field), version.spec.get(field)
        if old != new:
            yield f"{field}: {_shown(old)} -> {_shown(new)}"


def _statuses(versions: Sequence[JobVersionView]) -> dict[int, str | None]:
    """The job's status after each listed version, as far as the list tells (oldest first)."""
    found: dict[int, str | None] = {}
    status: str | None = None
    for version in reversed(versions):
        status = STATUS_AFTER.get(version.change, status)
        found[version.version] = status
    return found


def _shown(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


COMMANDS = (history,)
