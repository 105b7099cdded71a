"""`Node.start` in this process: a start that fails part-way leaves nothing running.

Before each part registered its stop as it started, a taken API or metrics port (aiohttp's
`site.start()` raises OSError) left the Raft replica's threads running and the data directory
locked: the process lived on with them, and the next Node on that directory was refused.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from schedd.config import NodeConfig, load_config
from schedd.errors import ConfigError
from schedd.node import Node
from tests.servers import SINGLE_NODE_ELECTION

WAIT_S = 10.0


def node_config(tmp_path: Path, api_port: int, raft_port: int, metrics_port: int) -> NodeConfig:
    path = tmp_path / "node.toml"
    path.write_text(
        f'[node]\nid = "n1"\ndata_dir = "{tmp_path / "data"}"\n\n'
        f'[api]\nlisten = "127.0.0.1:{api_port}"\n\n'
        f'[raft]\nlisten = "127.0.0.1:{raft_port}"\n{SINGLE_NODE_ELECTION}\n'
        f'[metrics]\nlisten = "127.0.0.1:{metrics_port}"\n'
    )
    return load_config(str(path), env={})


def new_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before and t.is_alive()]


def wait_for_no_new_threads(before: set[threading.Thread]) -> None:
    """Raft's threads end when its replica is destroyed; the rest within a moment of stop."""
    deadline = time.monotonic() + WAIT_S
    while new_threads(before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not new_threads(before), f"threads left running: {new_threads(before)}"


async def start_and_stop(node: Node) -> None:
    try:
        await node.start()
        await asyncio.wait_for(node.wait_ready(), WAIT_S)
    finally:
        await node.stop()


@pytest.mark.parametrize("taken", ["api", "metrics"])
def test_a_start_that_cannot_bind_a_port_stops_raft_and_unlocks_the_data_dir(
    tmp_path: Path, free_port: Callable[[], int], taken: str
) -> None:
    api_port, raft_port, metrics_port = free_port(), free_port(), free_port()
    before = set(threading.enumerate())
    node = Node(node_config(tmp_path, api_port, raft_port, metrics_port))
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
            holder.bind(("127.0.0.1", api_port if taken == "api" else metrics_port))
            holder.listen()
            with pytest.raises(OSError):
                asyncio.run(node.start())
        wait_for_no_new_threads(before)
        # Same data dir and Raft address, the port free now: the lock and the port were let go.
        again = Node(node_config(tmp_path, api_port, raft_port, metrics_port))
        asyncio.run(start_and_stop(again))
        asyncio.run(again.stop())  # a second stop() does nothing
        wait_for_no_new_threads(before)
    finally:
        asyncio.run(node.stop())  # stops nothing more once start() has unwound


def test_a_node_refused_by_its_config_leaves_the_data_dir_unlocked(
    tmp_path: Path, free_port: Callable[[], int]
) -> None:
    """A ConfigError raised after the data directory was locked (here: a partitions count that
    differs from the store's) lets go of the lock and the store: the same process may open a
    corrected Node on that directory at once."""
    config = node_config(tmp_path, free_port(), free_port(), free_port())
    asyncio.run(Node(config).stop())  # the store now records its partitions
    changed = dataclasses.replace(config, partitions=config.partitions * 2)
    with pytest.raises(ConfigError, match="partitions"):
        Node(changed)
    again = Node(config)  # refused as "in use by another process" before the fix
    asyncio.run(again.stop())
