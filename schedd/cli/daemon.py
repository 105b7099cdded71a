"""`schedd`: the node daemon's command line: `serve` one node, or `dev` for a local cluster."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import click

from schedd import __version__, logs
from schedd.cli.devcluster import dev
from schedd.cli.exits import run
from schedd.config import NodeConfig, load_config
from schedd.node import serve as serve_node


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.version_option(__version__, prog_name="schedd")
def cli(debug: bool) -> None:
    """Run schedd nodes: `schedd serve --config FILE`, or `schedd dev` for a local cluster."""


@cli.command(
    epilog="""\b
Examples:
  schedd serve --config config/single.toml
  SCHEDD_RAFT_SECRET=... schedd serve --config /etc/schedd/schedd.toml""",
)
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The node's TOML file (see docs/configuration.md).",
)
def serve(config_path: Path) -> None:
    """Run one node until SIGTERM or SIGINT; logs a `ready` line when it serves."""
    config = load_config(config_path)
    logs.configure(config.log_level, config.log_format)
    asyncio.run(_serve_until_signalled(config))


async def _serve_until_signalled(config: NodeConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await serve_node(config, stop_event=stop)


cli.add_command(dev)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `schedd` console script."""
    run(cli, "schedd", argv)
