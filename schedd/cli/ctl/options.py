"""The global options of schedctl, defined once: on the group, and stacked on every command.

`schedctl --token T ls` and `schedctl ls --token T` mean the same; a value given after the verb
wins over one given before it, which wins over the environment (read by the group only).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import click
from click.core import ParameterSource

from schedd.cli.ctl.client import DEFAULT_TIMEOUT_S, DEFAULT_URL, Client


@dataclass(frozen=True)
class GlobalOption:
    """One global option: its flag, the Client attribute (or meta key) it sets, click settings."""

    flag: str
    attr: str
    settings: dict[str, Any] = field(default_factory=dict)
    envvar: str | None = None
    default: Any = None


GLOBAL_OPTIONS = (
    GlobalOption(
        "--url",
        "url",
        {
            "metavar": "URL[,URL...]",
            "help": "Node API URL; a comma-separated list fails over to the next node.",
        },
        envvar="SCHEDCTL_URL",
        default=DEFAULT_URL,
    ),
    GlobalOption(
        "--token",
        "token",
        {"metavar": "TOKEN", "help": "Tenant or admin token."},
        envvar="SCHEDCTL_TOKEN",
    ),
    GlobalOption(
        "--tenant",
        "tenant",
        {"metavar": "TENANT_ID", "help": "With the admin token: the tenant to act for."},
        envvar="SCHEDCTL_TENANT",
    ),
    GlobalOption(
        "--timeout",
        "timeout_s",
        {
            "type": click.FloatRange(min=0, min_open=True),
            "metavar": "SECONDS",
            "help": "Give up on a node after this long.",
        },
        envvar="SCHEDCTL_TIMEOUT",
        default=DEFAULT_TIMEOUT_S,
    ),
    GlobalOption(
        "--cacert",
        "cacert",
        {
            "type": click.Path(exists=True, dir_okay=False),
            "metavar": "FILE",
            "help": "Verify https:// nodes with the CA certificate(s) in FILE (PEM).",
        },
        envvar="SCHEDCTL_CACERT",
    ),
    GlobalOption("--debug", "debug", {"is_flag": True, "help": "Show tracebacks on errors."}),
)


def group_options() -> list[click.Option]:
    """The options as the group takes them: with their environment variables and defaults."""
    return [
        click.Option(
            [option.flag, option.attr],
            envvar=option.envvar,
            default=option.default,
            show_default=option.default is not None,
            **option.settings,
        )
        for option in GLOBAL_OPTIONS
    ]


def _apply(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """Put a value given after the verb on the Client (or, --debug, in ctx.meta)."""
    assert param.name is not None
    if ctx.get_parameter_source(param.name) is not ParameterSource.COMMANDLINE:
        return
    attr = param.name.removeprefix("global_")
    if attr == "debug":
        ctx.meta["debug"] = True
    else:
        client = ctx.ensure_object(Client)
        setattr(client, attr, value)
        if attr == "token":
            client.token_source = "--token"


def stacked_options(command: click.Command) -> list[click.Option]:
    """The options as a command takes them after the verb: no environment, no default.

    A global option whose flag the command has for itself (`work --timeout`) is left out."""
    taken = {opt for param in command.params for opt in param.opts}
    return [
        click.Option(
            [option.flag, f"global_{option.attr}"],
            callback=_apply,
            expose_value=False,
            allow_from_autoenv=False,
            **option.settings,
        )
        for option in GLOBAL_OPTIONS
        if option.flag not in taken
    ]


def walk(command: click.Command) -> Iterator[click.Command]:
    """The command and every command under it."""
    yield command
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            yield from walk(sub)


def stack_on_every_command(group: click.Group) -> None:
    """Add the global options to every command and subcommand under `group`."""
    for command in walk(group):
        if command is not group:
            command.params.extend(stacked_options(command))
