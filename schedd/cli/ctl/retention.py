"""`schedctl gc status` (what a node keeps and its disk, admin token) and `schedctl retention`
(a tenant's own, shorter, retention): they call the retention routes and print the answers."""

from __future__ import annotations

import click
import msgspec
from msgspec import UnsetType

from schedd.cli.ctl import render
from schedd.cli.ctl.answers import Answer
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.render import json_option
from schedd.jsonbody import JSONValue
from schedd.retention import KINDS, parse_tenant_retention
from schedd.storage import format_size
from schedd.wire.retention_status import RetentionStatus
from schedd.wire.tenants import TenantRetention


@click.group()
def gc() -> None:
    """What a node keeps under its retention, and its disk (admin token; --url one node)."""


@gc.command(
    "status",
    epilog="""\b
Examples:
  schedctl gc status                 # the node --url names (the first that answers)
  schedctl gc status --url http://10.0.0.2:8701 --json""",
)
@json_option("the API's retention status object (GET /v1/admin/retention)")
@click.pass_obj
def gc_status(client: Client, as_json: bool) -> None:
    """Rows and the oldest kept per kind, file sizes, free disk and the last prune; the history
    segments (name, state, rows, bytes on this node: - when not here yet)."""
    answer = client.answer(RetentionStatus, "GET", "/v1/admin/retention")
    if as_json:
        render.print_json(answer.raw)
        return
    state = answer.view
    keep = msgspec.structs.asdict(state.retention)
    kept = {"runs": keep["runs"], "jobs": keep["runs"]} | {k: keep[k] for k in KINDS}
    rows = [
        (
            kind.kind,
            f"{'>= ' if kind.rows_capped else ''}{kind.rows:,}",
            kind.oldest or "-",
            kept.get(kind.kind, "-"),
        )
        for kind in state.kinds
    ]
    render.print_table(("KIND", "ROWS", "OLDEST KEPT (UTC)", "RETENTION"), rows)
    click.echo()
    fields = [("node", state.node_id), ("last prune", state.last_prune or "never")]
    if not isinstance(state.files, UnsetType):  # absent: a node without a storage guard
        sizes = msgspec.structs.asdict(state.files)
        fields += [(name, format_size(size)) for name, size in sizes.items()]
    if not isinstance(state.disk, UnsetType):
        disk = state.disk
        free = f"{format_size(disk.free_bytes)} (min {format_size(disk.min_free_bytes)})"
        fields.append(("free disk", free))
    if not isinstance(state.writes, UnsetType):
        reason = state.reason if isinstance(state.reason, str) else None
        fields.append(("writes", state.writes + (f": {reason}" if reason else "")))
    render.print_fields(fields)
    if not isinstance(state.segments, UnsetType):
        click.echo()
        render.print_table(
            ("SEGMENT", "STATE", "ROWS", "BYTES"),
            [
                (s.name, s.state, f"{s.rows:,}", "-" if s.bytes is None else format_size(s.bytes))
                for s in state.segments
            ],
        )


@click.group(invoke_without_command=True)
@click.pass_context
def retention(ctx: click.Context) -> None:
    """Show or shorten how long this tenant's history is kept."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(show_retention)


@retention.command("show")
@json_option("the API's retention object (GET /v1/retention)")
@click.pass_obj
def show_retention(client: Client, as_json: bool = False) -> None:
    """The retention in force per kind, the tenant's own values and the node's."""
    _print_retention(client.answer(TenantRetention, "GET", "/v1/retention"), as_json=as_json)


@retention.command(
    "set",
    epilog="""\b
Examples:
  schedctl retention set runs=1d messages=2h   # others follow the node's again
  schedctl retention set                       # clear: the node's retention for all""",
)
@click.argument("values", nargs=-1, metavar="KIND=DURATION...")
@json_option("the API's retention object")
@click.pass_obj
def set_retention(client: Client, values: tuple[str, ...], as_json: bool) -> None:
    """Replace this tenant's own retention. KIND is runs, deadletters or messages (the audit
    trail is the operator's); a value longer than the node's has no effect."""
    body: dict[str, JSONValue] = {}
    for value in values:
        kind, sep, duration = value.partition("=")
        if not sep or not duration:
            raise click.BadParameter(f"{value!r} is not KIND=DURATION", param_hint="VALUES")
        body[kind] = duration
    parse_tenant_retention(body, field="")  # bad input exits 2 here, naming the KIND
    answer = client.answer(TenantRetention, "PUT", "/v1/retention", body)
    _print_retention(answer, as_json=as_json)


def _print_retention(answer: Answer[TenantRetention], *, as_json: bool) -> None:
    if as_json:
        render.print_json(answer.raw)
        return
    kept = msgspec.structs.asdict(answer.view.retention)
    own = msgspec.to_builtins(answer.view.own)  # only the kinds the tenant set
    node = msgspec.structs.asdict(answer.view.node)
    rows = [(kind, kept[kind], own.get(kind, "-"), node[kind]) for kind in KINDS]
    render.print_table(("KIND", "KEPT FOR", "TENANT'S OWN", "NODE'S"), rows)


COMMANDS = (gc, retention)
