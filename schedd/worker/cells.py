"""The cells a worker receives from (issue 35), without I/O: GET /v1/cells read, the node URLs of
each cell, which cell handed out each receipt held (a receipt is settled only where it was
handed out), and when to read the cells again. Worker and AsyncWorker share it.

One cell, or a node from before cells (404), is the URLs the worker was given: exactly the
worker of before.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Sequence

import msgspec

from schedd.worker.nodes import Nodes, Switched

CELLS_PATH = "/v1/cells"
REFRESH_S = 60.0  # the cells are read again this often, and at once after a hint
ONE_CELL = "default"


class _Listed(msgspec.Struct, frozen=True):
    cell: str
    urls: list[str]


class _Directory(msgspec.Struct, frozen=True):
    directory_revision: int
    cells: list[_Listed]


def read_cells(data: bytes, source: str) -> tuple[int, dict[str, tuple[str, ...]]] | None:
    """(revision, each cell's node URLs) of a GET /v1/cells answer from `source`; None for a
    body that is not one (a node from before cells). URLs that are not http(s)://host[:port]
    are left out, and http:// ones when `source` is https:// (the token stays on TLS)."""
    try:
        directory = msgspec.json.decode(data, type=_Directory)
    except msgspec.DecodeError:
        return None
    schemes = ("https",) if source.startswith("https://") else ("http", "https")
    cells = {listed.cell: _node_urls(listed.urls, schemes) for listed in directory.cells}
    return directory.directory_revision, {name: urls for name, urls in cells.items() if urls}


def directory_of(data: bytes, source: str) -> tuple[int, dict[str, tuple[str, ...]] | None]:
    """GET /v1/cells's answer as a Reader: a body that is not one is a node from before
    cells."""
    return read_cells(data, source) or (0, None)


def outputs_of(outputs: dict[str, str] | None, receipts: list[str]) -> dict[str, str] | None:
    """The outputs of `receipts` only (a settle is sent to each cell with its receipts)."""
    if not outputs:
        return None
    return {receipt: outputs[receipt] for receipt in receipts if receipt in outputs} or None


class Cells:
    """The cells in use, each with its Nodes (failover within the cell), and the cell of each
    receipt held. Thread-safe; the asyncio worker uses it from its loop."""

    def __init__(self, seed: Nodes, on_switch: Switched) -> None:
        self.seed = seed  # the URLs given: the one cell's when there is one
        self.revision = 0
        self._on_switch = on_switch
        self._cells: dict[str, Nodes] = {ONE_CELL: seed}
        self._receipts: dict[str, Nodes] = {}
        self._refresh_at_s = 0.0  # due at once
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        with self._lock:
            return list(self._cells)

    @property
    def is_several(self) -> bool:
        return len(self.names) > 1

    def nodes(self, cell: str) -> Nodes | None:
        """The cell's nodes; None once it left the directory."""
        with self._lock:
            return self._cells.get(cell)

    def urls(self) -> dict[str, str]:
        """Each cell's node in use."""
        with self._lock:
            return {name: nodes.current for name, nodes in self._cells.items()}

    def adopt(self, revision: int, cells: dict[str, tuple[str, ...]] | None) -> list[str]:
        """Use the cells of a directory (None: a node from before cells); the new cells' names.
        A cell whose URLs did not change keeps its Nodes (and so its node in use)."""
        with self._lock:
            self._refresh_at_s = time.monotonic() + REFRESH_S
            if cells is None or len(cells) <= 1:  # one cell, whatever its name: the URLs given
                fresh = {ONE_CELL: self.seed}
            else:
                fresh = {name: self._kept(name, urls) for name, urls in cells.items()}
            added = [name for name in fresh if name not in self._cells]
            self._cells, self.revision = fresh, revision
            return added

    def _kept(self, name: str, urls: tuple[str, ...]) -> Nodes:
        known = self._cells.get(name)
        if known is not None and known.urls == urls:
            return known
        return Nodes(urls, self._on_switch)

    def want_refresh(self) -> None:
        """A hint that the directory changed (a wrong_cell answer, a receipt not known)."""
        with self._lock:
            self._refresh_at_s = 0.0

    def take_refresh(self) -> bool:
        """Whether the cells are to be read now (the next read is then REFRESH_S away, unless
        a hint comes first)."""
        with self._lock:
            now_s = time.monotonic()
            if now_s < self._refresh_at_s:
                return False
            self._refresh_at_s = now_s + REFRESH_S
            return True

    def hold(self, nodes: Nodes, receipts: Sequence[str]) -> None:
        """`nodes`' cell handed out `receipts`."""
        with self._lock:
            self._receipts.update(dict.fromkeys(receipts, nodes))

    def forget(self, receipts: Sequence[str]) -> None:
        with self._lock:
            for receipt in receipts:
                self._receipts.pop(receipt, None)

    def by_cell(self, receipts: Sequence[str]) -> list[tuple[Nodes, list[str]]]:
        """`receipts` grouped by the cell that handed them out (one not held: the seed's)."""
        groups: dict[int, tuple[Nodes, list[str]]] = {}
        with self._lock:
            for receipt in receipts:
                nodes = self._receipts.get(receipt, self.seed)
                groups.setdefault(id(nodes), (nodes, []))[1].append(receipt)
        return list(groups.values())


def share(concurrency: int, running: int, reserved: int, cells: int) -> int:
    """The handler slots one cell's receive may ask for: the free ones split over the cells
    (at least one), so that every cell's long poll can hold some."""
    free = concurrency - running - reserved
    return 0 if free <= 0 else max(1, free // max(1, cells))


def _node_urls(urls: Sequence[str], schemes: tuple[str, ...]) -> tuple[str, ...]:
    found = []
    for url in urls:
        parts = urllib.parse.urlsplit(url.rstrip("/"))
        try:
            is_node = parts.scheme in schemes and bool(parts.hostname)
            is_node = is_node and parts.path == "" and parts.port != 0
        except ValueError:  # a port that is not a number
            is_node = False
        if is_node:
            found.append(url.rstrip("/"))
    return tuple(found)
