"""Loopback ports for the test servers, safe when pytest-xdist runs several workers at once.

Each worker takes ports from a range of its own (`PYTEST_XDIST_WORKER` gwN: RANGE ports from
FIRST + N * RANGE), below the kernel's ephemeral range (32768-60999 here), so no other worker
and no outgoing connection can be handed a port between the moment it is found free and the
moment a node binds it. Within a worker the ports go round the range in turn, so a port
released a moment ago is not handed out again soon.
"""

from __future__ import annotations

import itertools
import os
import random
import socket

FIRST = 10_000
RANGE = 2_500  # ports per worker: 8 workers fit below 30,000
WORKERS = 8


def worker_index() -> int:
    """This process's xdist worker number (0 without xdist)."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name.removeprefix("gw")) % WORKERS if name.startswith("gw") else 0


_start = FIRST + worker_index() * RANGE
_order = itertools.cycle(range(_start, _start + RANGE))
for _ in range(random.randrange(RANGE)):  # a random first port: runs close together differ
    next(_order)


def is_free(port: int) -> bool:
    """Whether a listening socket may bind the loopback port now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports of this worker's range, free now."""
    found: list[int] = []
    for _ in range(RANGE):
        port = next(_order)
        if is_free(port):
            found.append(port)
            if len(found) == count:
                return found
    raise AssertionError(f"no {count} free ports in 127.0.0.1:{_start}-{_start + RANGE - 1}")


def free_port() -> int:
    return free_ports(1)[0]


def free_port_runs(count: int) -> tuple[int, int]:
    """Two first ports, each followed by `count - 1` more, all free (for `schedd dev --nodes`)."""
    for _ in range(RANGE):
        api = next(_order)
        if api + 2 * count > _start + RANGE:
            continue
        ports = [*range(api, api + 2 * count)]
        if all(is_free(p) for p in ports):
            for _ in range(2 * count - 1):
                next(_order)
            return api, api + count
    raise AssertionError(f"no free runs of {count} ports in this worker's range")
