"""Admin commands of schedctl: `tenants create|ls` and the cluster `status` (admin token)."""

from __future__ import annotations

import click

from schedd.cli.ctl import render
from schedd.cli.ctl.answers import Answer, all_pages
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.older_nodes import Tenants
from schedd.cli.ctl.render import json_option, page_options
from schedd.cli.ctl.status import status
from schedd.jsonbody import JSONValue


@click.group()
def tenants() -> None:
    """Create and list tenants (admin token)."""


@tenants.command(
    "create",
    epilog="""\b
Examples:
  schedctl tenants create acme
  schedctl tenants create acme --max-active-jobs 10000 --allowed-host '*.acme.example' --json""",
)
@click.argument("name")
@click.option(
    "--max-active-jobs",
    type=click.IntRange(min=0),
    metavar="N",
    help="Most jobs active or paused at once [default: 1000000].",
)
@click.option(
    "--dispatch-rate",
    type=click.IntRange(min=0),
    metavar="N",
    help="Most runs dispatched per second [default: 5000].",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="HOST",
    help="A host HTTP targets may call, like '*.acme.example'; repeat for more.",
)
@json_option('{"tenant_id": ..., "token": ..., "signing_secret": ...}')
@click.pass_obj
def create_tenant(
    client: Client,
    name: str,
    max_active_jobs: int | None,
    dispatch_rate: int | None,
    allowed_hosts: tuple[str, ...],
    as_json: bool,
) -> None:
    """Create tenant NAME and print its token and signing secret (shown only once)."""
    body: dict[str, JSONValue] = {"name": name}
    if max_active_jobs is not None:
        body["max_active_jobs"] = max_active_jobs
    if dispatch_rate is not None:
        body["dispatch_rate"] = dispatch_rate
    if allowed_hosts:
        body["allowed_hosts"] = list(allowed_hosts)
    render.show_credentials(client.create_tenant(body), as_json=as_json)


@tenants.command(
    "ls",
    epilog="""\b
Examples:
  schedctl tenants ls
  schedctl tenants ls --all --json""",
)
@page_options
@json_option('{"tenants": [...], "next_cursor": ...}')
@click.pass_obj
def list_tenants(
    client: Client, limit: int, cursor: str | None, is_all: bool, as_json: bool
) -> None:
    """List tenants with their quotas and active job counts."""

    def fetch(after: str | None) -> Answer[Tenants]:
        return client.list_tenants(cursor=after, limit=limit)

    page = all_pages(fetch, "tenants", cursor) if is_all else fetch(cursor)
    render.show_tenants(page, as_json=as_json)


COMMANDS = (tenants, status)
