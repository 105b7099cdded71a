"""The `schedctl` group, its shared options, and the entry point."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from schedd import __version__
from schedd.cli.ctl import admin, jobs, queues
from schedd.cli.ctl.client import DEFAULT_TIMEOUT_S, DEFAULT_URL, Client
from schedd.cli.ctl.cluster import cluster
from schedd.cli.ctl.crontab import import_crontab
from schedd.cli.ctl.preview import next_runs
from schedd.cli.ctl.top import top
from schedd.cli.ctl.work import work
from schedd.cli.exits import run


@click.group(
    context_settings={"auto_envvar_prefix": "SCHEDCTL", "help_option_names": ["-h", "--help"]},
    epilog="Environment: SCHEDCTL_URL, SCHEDCTL_TOKEN, SCHEDCTL_TENANT and SCHEDCTL_CACERT stand "
    "in for --url, --token, --tenant and --cacert. Exit codes: 0 ok, 1 not found or conflict, "
    "2 invalid input, 3 cluster unavailable.",
)
@click.option(
    "--url",
    envvar="SCHEDCTL_URL",
    default=DEFAULT_URL,
    show_default=True,
    metavar="URL[,URL...]",
    help="Node API URL; a comma-separated list fails over to the next node.",
)
@click.option("--token", envvar="SCHEDCTL_TOKEN", metavar="TOKEN", help="Tenant or admin token.")
@click.option(
    "--tenant",
    envvar="SCHEDCTL_TENANT",
    metavar="TENANT_ID",
    help="With the admin token: the tenant to act for.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="Give up on a node after this long.",
)
@click.option(
    "--cacert",
    envvar="SCHEDCTL_CACERT",
    type=click.Path(exists=True, dir_okay=False),
    metavar="FILE",
    help="Verify https:// nodes with the CA certificate(s) in FILE (PEM).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.version_option(__version__, prog_name="schedctl")
@click.pass_context
def cli(
    ctx: click.Context,
    url: str,
    token: str | None,
    tenant: str | None,
    timeout: float,
    cacert: str | None,
    debug: bool,
) -> None:
    """Manage schedd jobs, runs and queues from the shell."""
    ctx.meta["debug"] = debug
    ctx.obj = Client(url, token=token, tenant=tenant, timeout_s=timeout, cacert=cacert)


for command in (*jobs.COMMANDS, next_runs, *admin.COMMANDS):
    cli.add_command(command)
cli.add_command(work)
cli.add_command(import_crontab)
cli.add_command(top)
cli.add_command(cluster)
for command in queues.COMMANDS:
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
