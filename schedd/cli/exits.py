"""The one place CLI failures become messages and exit codes (never a traceback without --debug)."""

from __future__ import annotations

import sys
import traceback

import click

from schedd.errors import SchedError


def run(group: click.Group, prog_name: str, argv: list[str] | None = None) -> None:
    """Run a click group: errors are one line on stderr and the error's exit code."""
    args = sys.argv[1:] if argv is None else argv
    try:
        group.main(args=args, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except SchedError as exc:
        if "--debug" in args:
            traceback.print_exc()
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
