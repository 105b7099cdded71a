"""The `schedctl` group, its shared options, and the entry point."""

from __future__ import annotations

import click

from schedd import __version__
from schedd.cli.ctl.preview import next_runs
from schedd.cli.exits import run


@click.group(
    context_settings={"auto_envvar_prefix": "SCHEDCTL", "help_option_names": ["-h", "--help"]},
    epilog="Environment: SCHEDCTL_URL and SCHEDCTL_TOKEN stand in for --url and --token.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.version_option(__version__, prog_name="schedctl")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Manage schedd jobs, runs and queues from the shell."""
    ctx.meta["debug"] = debug


cli.add_command(next_runs)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `schedctl` console script."""
    run(cli, "schedctl", argv)
