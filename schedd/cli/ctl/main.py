"""The `schedctl` group, its shared options, and the entry point."""

from __future__ import annotations

import click
from click.core import ParameterSource
from click.shell_completion import get_completion_class

from schedd import __version__
from schedd.cli.ctl import (
    admin,
    alerts,
    apply,
    calendars,
    connections,
    history,
    jobs,
    pauses,
    queues,
    retention,
)
from schedd.cli.ctl.backfill import backfill
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.cluster import cluster
from schedd.cli.ctl.crontab import import_crontab
from schedd.cli.ctl.forecast import forecast
from schedd.cli.ctl.options import group_options, stack_on_every_command
from schedd.cli.ctl.preview import next_runs
from schedd.cli.ctl.top import top
from schedd.cli.ctl.work import work
from schedd.cli.exits import run


@click.group(
    context_settings={"auto_envvar_prefix": "SCHEDCTL", "help_option_names": ["-h", "--help"]},
    params=group_options(),
    epilog="The options above also work after the command (schedctl ls --token T), on every "
    "command; a value given after it wins. Environment: SCHEDCTL_URL, SCHEDCTL_TOKEN, "
    "SCHEDCTL_TENANT, SCHEDCTL_TIMEOUT and SCHEDCTL_CACERT stand in for --url, --token, "
    "--tenant, --timeout and --cacert. Exit codes: 0 ok, 1 not found or conflict, "
    "2 invalid input, 3 cluster unavailable, 4 token missing or unknown.",
)
@click.version_option(__version__, prog_name="schedctl")
@click.pass_context
def cli(
    ctx: click.Context,
    url: str,
    token: str | None,
    tenant: str | None,
    timeout_s: float,
    cacert: str | None,
    debug: bool,
) -> None:
    """Manage schedd jobs, runs and queues from the shell."""
    ctx.meta["debug"] = debug
    ctx.obj = Client(url, token=token, tenant=tenant, timeout_s=timeout_s, cacert=cacert)
    if ctx.get_parameter_source("token") is ParameterSource.ENVIRONMENT:
        ctx.obj.token_source = "SCHEDCTL_TOKEN"


for command in (
    *jobs.COMMANDS,
    *pauses.COMMANDS,
    *history.COMMANDS,
    *alerts.COMMANDS,
    backfill,
    next_runs,
    forecast,
    *admin.COMMANDS,
):
    cli.add_command(command)
cli.add_command(work)
cli.add_command(import_crontab)
for command in apply.COMMANDS:
    cli.add_command(command)
cli.add_command(top)
cli.add_command(cluster)
for command in (
    *queues.COMMANDS,
    *retention.COMMANDS,
    connections.connections,
    calendars.calendars,
):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `schedctl` console script."""
    run(cli, "schedctl", argv)


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    \b
    bash: schedctl completion bash > ~/.local/share/bash-completion/completions/schedctl
    zsh:  schedctl completion zsh > "${fpath[1]}/_schedctl"
    fish: schedctl completion fish > ~/.config/fish/completions/schedctl.fish
    """
    completer = get_completion_class(shell)
    assert completer is not None  # the three choices are click's own
    click.echo(completer(cli, {}, "schedctl", "_SCHEDCTL_COMPLETE").source())


stack_on_every_command(cli)  # last: after every command is added
