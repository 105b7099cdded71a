"""`schedctl pause` and `resume`: a job, a queue (--queue) or, for an admin, a whole tenant
(--tenant alone), with an optional --reason kept and audited."""

from __future__ import annotations

import click
from rich.text import Text

from schedd.cli.ctl import render
from schedd.cli.ctl.answers import Answer
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.jobs import JOB_JSON
from schedd.cli.ctl.render import console, json_option, print_json
from schedd.errors import InvalidRequest
from schedd.wire.pauses import MAX_REASON, QueuePause
from schedd.wire.tenants import TenantView

PAUSE_EPILOG = """\b
Examples:
  schedctl pause job_0123abcd --reason "payments API down (INC-42)"
  schedctl pause --queue emails --reason "SMTP relay swap"
  schedctl pause --tenant tnt_0123abcd --reason "migration"   # admin token
  schedctl resume --queue emails"""

SCOPE_HELP = (
    "Give a JOB_ID, or --queue NAME (the tenant's queue: receives hand out nothing while "
    "paused, runs still arrive), or --tenant ID alone with an admin token (none of the "
    "tenant's runs is claimed while paused)."
)


def _scope(client: Client, job_id: str | None, queue: str | None) -> str:
    """What the command acts on: "job", "queue" or "tenant" (the --tenant option alone)."""
    if job_id is not None and queue is not None:
        raise InvalidRequest("--queue", "give a JOB_ID or --queue, not both")
    if job_id is not None:
        return "job"
    if queue is not None:
        return "queue"
    if client.tenant:
        return "tenant"
    raise InvalidRequest("JOB_ID", "missing: " + SCOPE_HELP)


@click.command(epilog=PAUSE_EPILOG, help="Pause a job, a queue or a tenant. " + SCOPE_HELP)
@click.argument("job_id", required=False)
@click.option("--queue", metavar="NAME", help="Pause this queue's receives.")
@click.option(
    "--reason",
    metavar="TEXT",
    help=f"Why (at most {MAX_REASON} characters): shown as paused_reason and audited.",
)
@json_option(JOB_JSON + " (a job), the queue's pause or the tenant")
@click.pass_obj
def pause(
    client: Client, job_id: str | None, queue: str | None, reason: str | None, as_json: bool
) -> None:
    scope = _scope(client, job_id, queue)
    if scope == "job" and job_id is not None:
        render.show_job(client.pause_job(job_id, reason=reason), as_json=as_json)
    elif scope == "queue" and queue is not None:
        _show_queue(client.pause_queue(queue, reason=reason), as_json=as_json)
    else:
        _show_tenant(client.pause_tenant(str(client.tenant), reason=reason), as_json=as_json)


@click.command(
    epilog="\b\nExamples:\n  schedctl resume job_0123abcd\n  schedctl resume --queue emails\n"
    "  schedctl resume --tenant tnt_0123abcd",
    help="Resume a job (from its next run after now), a queue (its messages are receivable at "
    "once) or a tenant (each job's misfire policy decides on the runs it missed). " + SCOPE_HELP,
)
@click.argument("job_id", required=False)
@click.option("--queue", metavar="NAME", help="Resume this queue's receives.")
@json_option(JOB_JSON + " (a job), the queue's pause or the tenant")
@click.pass_obj
def resume(client: Client, job_id: str | None, queue: str | None, as_json: bool) -> None:
    scope = _scope(client, job_id, queue)
    if scope == "job" and job_id is not None:
        render.show_job(client.resume_job(job_id), as_json=as_json)
    elif scope == "queue" and queue is not None:
        _show_queue(client.resume_queue(queue), as_json=as_json)
    else:
        _show_tenant(client.resume_tenant(str(client.tenant)), as_json=as_json)


def _state(paused: bool, reason: str | None) -> str:
    if not paused:
        return "active"
    return "paused" if reason is None else f"paused: {reason}"


def _show_queue(answer: Answer[QueuePause], *, as_json: bool) -> None:
    if as_json:
        print_json(answer.raw)
        return
    queue = answer.view
    console().print(Text(f"queue {queue.name}: {_state(queue.paused, queue.paused_reason)}"))


def _show_tenant(answer: Answer[TenantView], *, as_json: bool) -> None:
    if as_json:
        print_json(answer.raw)
        return
    tenant = answer.view
    state = _state(tenant.paused, tenant.paused_reason)
    console().print(Text(f"tenant {tenant.tenant_id} ({tenant.name}): {state}"))


COMMANDS = (pause, resume)
