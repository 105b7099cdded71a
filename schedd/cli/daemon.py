"""`schedd`: the node daemon's command line (serve, dev)."""

from __future__ import annotations

import click

from schedd import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="schedd")
def cli() -> None:
    """Run schedd nodes: `schedd serve --config FILE`, or `schedd dev` for a local cluster."""


def main() -> None:
    """Entry point of the `schedd` console script."""
    cli(prog_name="schedd")
