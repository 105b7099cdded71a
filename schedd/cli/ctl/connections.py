"""`schedctl connections add|ls|rm|test` (a tenant's broker connections) and the broker target
flags of `schedctl add` (--redis-stream, --rabbitmq, --nats).

A connection's URL holds credentials: it is read from an argument, stdin or an environment
variable, sent once, and never printed.
"""

from __future__ import annotations

import os
import sys
import urllib.parse

import click

from schedd.cli.ctl import render
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.render import json_option
from schedd.errors import InvalidRequest, SchedError
from schedd.jsonbody import JSONValue
from schedd.targets import KINDS, CliFlag
from schedd.wire.tenants import ConnectionList, ConnectionTest, ConnectionView

URL_ENV = "SCHEDCTL_CONNECTION_URL"
CONNECTION_JSON = '{"name", "kind", "host", "created_at"}'
BROKER_FLAGS = tuple(kind.flag.flag for kind in KINDS)


class ConnectionFailed(SchedError):
    """`connections test` reached the node, and the node could not use the connection."""

    code = "connection_failed"
    exit_code = 1


def connection_path(name: str) -> str:
    return "/v1/connections/" + urllib.parse.quote(name, safe="")


@click.group()
def connections() -> None:
    """Manage the tenant's named broker connections (Redis, RabbitMQ, NATS)."""


@connections.command(
    "add",
    epilog=f"""\b
Examples:
  schedctl connections add r redis://user:pw@redis.acme.example:6379/0
  printf '%s' "$REDIS_URL" | schedctl connections add r -
  {URL_ENV}="$AMQP_URL" schedctl connections add mq""",
)
@click.argument("name")
@click.argument("url", required=False, metavar="[URL]")
@json_option(CONNECTION_JSON)
@click.pass_obj
def add_connection(client: Client, name: str, url: str | None, as_json: bool) -> None:
    """Create connection NAME to the broker at URL (redis://, rediss://, amqp://, amqps://,
    nats:// or tls://, credentials included). The URL is never shown again. To keep it out of
    your shell history, give - to read it from stdin, or leave it out to read it from the
    SCHEDCTL_CONNECTION_URL environment variable."""
    body: JSONValue = {"name": name, "url": _url(url)}
    answer = client.answer(ConnectionView, "POST", "/v1/connections", body)
    if as_json:
        render.print_json(answer.raw)
    else:
        _show([answer.view])


def _url(given: str | None) -> str:
    if given == "-":
        text = sys.stdin.readline().strip()
        source = "stdin"
    elif given is None:
        text = os.environ.get(URL_ENV, "").strip()
        source = URL_ENV
    else:
        return given
    if not text:
        raise InvalidRequest("URL", f"give it as an argument, - for stdin, or in {URL_ENV}")
    if not text.isprintable():
        raise InvalidRequest("URL", f"from {source} must be one line of printable text")
    return text


@connections.command(
    "ls",
    epilog="""\b
Examples:
  schedctl connections ls
  schedctl connections ls --json | jq -r '.connections[] | select(.kind == "redis") | .name'""",
)
@json_option(f'{{"connections": [{CONNECTION_JSON}, ...]}}')
@click.pass_obj
def list_connections(client: Client, as_json: bool) -> None:
    """List the tenant's connections: name, kind and host (never their URLs)."""
    answer = client.answer(ConnectionList, "GET", "/v1/connections")
    if as_json:
        render.print_json(answer.raw)
    elif answer.view.connections:
        _show(answer.view.connections)
    else:
        render.note("no connections")


def _show(items: list[ConnectionView]) -> None:
    rows = [(c.name, c.kind, c.host, c.created_at) for c in items]
    render.print_table(("NAME", "KIND", "HOST", "CREATED (UTC)"), rows)


@connections.command(
    "rm",
    epilog="\b\nExamples:\n  schedctl connections rm r",
)
@click.argument("name")
@json_option('{"name": ..., "status": "deleted"}')
@click.pass_obj
def remove_connection(client: Client, name: str, as_json: bool) -> None:
    """Delete connection NAME; refused (exit 1) while an active or paused job uses it."""
    client.request("DELETE", connection_path(name))
    if as_json:
        render.print_json({"name": name, "status": "deleted"})


@connections.command(
    "test",
    epilog="\b\nExamples:\n  schedctl connections test r && echo reachable",
)
@click.argument("name")
@json_option('{"ok": true | false, "detail": "..."}')
@click.pass_obj
def test_connection(client: Client, name: str, as_json: bool) -> None:
    """Connect to NAME's broker from a node, as a delivery would; exit 1 if that fails."""
    answer = client.answer(ConnectionTest, "POST", connection_path(name) + "/test")
    result = answer.view
    if as_json:
        render.print_json(answer.raw)
    elif result.ok:
        click.echo(f"ok: {result.detail}")
    if not result.ok:
        raise ConnectionFailed(f"connection {name!r} failed: {result.detail}")


# ---------------------------------------------------------------------------- schedctl add


def param_of(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")  # click's name of a flag's value


BROKER_OPTIONS = tuple(
    option
    for kind in KINDS
    for option in (
        click.option(kind.flag.flag, metavar=kind.flag.metavar, help=kind.flag.help),
        *(
            click.option(
                extra.flag,
                type=click.IntRange(extra.low, extra.high),
                metavar=extra.metavar,
                help=extra.help,
            )
            for extra in kind.flag.options
        ),
    )
)
BROKER_FLAG_NAMES = tuple(
    param_of(flag)
    for kind in KINDS
    for flag in (kind.flag.flag, *(extra.flag for extra in kind.flag.options))
)


def broker_target(**given: str | int | None) -> dict[str, JSONValue] | None:
    """The API's target object for a broker kind's flag (--redis-stream, ...; None: none given),
    `given` the values of BROKER_FLAG_NAMES."""
    for kind in KINDS:
        for extra in kind.flag.options:
            if given[param_of(extra.flag)] is not None and given[param_of(kind.flag.flag)] is None:
                raise InvalidRequest(extra.flag, f"applies to {kind.flag.flag} only")
    for kind in KINDS:
        value = given[param_of(kind.flag.flag)]
        if value is None:
            continue
        connection, *parts = _split(str(value), kind.flag, len(kind.flag.fields))
        target: dict[str, JSONValue] = {
            "type": kind.name,
            "connection": connection,
            **dict(zip(kind.flag.fields, parts, strict=True)),
        }
        for extra in kind.flag.options:
            if given[param_of(extra.flag)] is not None:
                target[extra.field] = given[param_of(extra.flag)]
        return target
    return None


def _split(value: str, flag: CliFlag, cuts: int) -> list[str]:
    """CONN and the rest, cut at the first `cuts` slashes (names of connections and exchanges
    hold no slash; streams, routing keys and subjects may)."""
    parts = value.split("/", cuts)
    if len(parts) != cuts + 1:
        raise InvalidRequest(flag.flag, f"must be {flag.metavar}, got {value!r}")
    return parts
