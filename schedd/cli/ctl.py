"""`schedctl`: the command-line client. It talks HTTP only (and previews schedules offline).

This module holds the group, the shared options and the one place errors become exit codes.
"""

from __future__ import annotations

import sys
import traceback

import click

from schedd import __version__
from schedd.cli.preview import next_runs
from schedd.errors import SchedError


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
    """Run schedctl: errors are one line on stderr and an exit code, never a traceback."""
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        cli.main(args=argv, prog_name="schedctl", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except SchedError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
