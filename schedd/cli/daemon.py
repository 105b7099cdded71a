"""`schedd`: the node daemon's command line: `serve` one node, or `dev` for a local cluster."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path

import click

from schedd import __version__, logs
from schedd.cli.devcluster import dev
from schedd.cli.exits import run
from schedd.config import NodeConfig, load_config
from schedd.node import serve as serve_node
from schedd.store.backup import restore_backup, write_backup


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


def _config_option(command: Callable[..., None]) -> Callable[..., None]:
    return click.option(
        "--config",
        "config_path",
        required=True,
        type=click.Path(dir_okay=False, path_type=Path),
        help="The node's TOML file (its data_dir is what is read or written).",
    )(command)


@cli.command(
    epilog="""\b
Examples:
  schedd backup --config /etc/schedd/node1.toml /backups/schedd-$(date +%F).db""",
)
@_config_option
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
def backup(config_path: Path, out: Path) -> None:
    """Write a consistent copy of the node's database to OUT, and the history segments it
    lists to OUT.history/, while the node serves."""
    config = load_config(config_path)
    info = write_backup(config.data_dir, out)
    click.echo(
        f"backup {info.path}: applied_index={info.applied_index} jobs={info.jobs} "
        f"bytes={info.size_bytes} segments={info.segments.copied}"
    )
    if info.segments.missing:
        click.echo(
            f"warning: segments not on this node, not in the backup: "
            f"{', '.join(info.segments.missing)} (back up a node that has them)",
            err=True,
        )


@cli.command(
    epilog="""\b
Disaster recovery: restore the same BACKUP on every node of the new cluster (all stopped),
then start them. See docs/operations.md.""",
)
@_config_option
@click.argument(
    "backup_path", metavar="BACKUP", type=click.Path(dir_okay=False, exists=True, path_type=Path)
)
@click.option("--yes", is_flag=True, help="Replace the data the node has without asking.")
def restore(config_path: Path, backup_path: Path, yes: bool) -> None:
    """Make BACKUP (and its history segments, BACKUP.history/) the state of this (stopped)
    node, on a fresh Raft log."""
    config = load_config(config_path)
    if (config.data_dir / "state.db").exists() and not yes:
        click.confirm(f"Replace the data in {config.data_dir} (its Raft log goes too)?", abort=True)
    info = restore_backup(backup_path, config.data_dir)
    click.echo(
        f"restored {backup_path} into {config.data_dir}: jobs={info.jobs} "
        f"segments={info.segments.copied}"
    )
    if info.segments.missing:
        click.echo(
            f"warning: segments listed but not in the backup: {', '.join(info.segments.missing)}",
            err=True,
        )


cli.add_command(dev)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `schedd` console script."""
    run(cli, "schedd", argv)
