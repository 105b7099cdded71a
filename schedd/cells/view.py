"""This node's cell as it serves requests: its configured range, the directory it last read,
and the answer for a partition (serve it here, redirect to its owner, or none owns it).

Read on the event loop and by dispatch threads; the directory is replaced whole, never changed
in place, so a reader sees one directory or the next."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from schedd.cells import receipts
from schedd.cells.directory import Directory, draw_id, key_partition
from schedd.errors import ClusterUnavailable, InvalidRequest, SchedError, WrongCell


@dataclass(frozen=True, slots=True)
class CellSettings:
    """What `[cluster] partitions` (a range) and `[cells]` configure."""

    cell: str
    first: int
    last: int
    partitions: int
    deployment: str
    etcd: tuple[str, ...]

    @property
    def prefix(self) -> str:
        return f"/schedd/{self.deployment}/"


class CellView:
    """The cell's range and the last directory read (from etcd, or the local copy)."""

    def __init__(self, settings: CellSettings, directory: Directory | None = None) -> None:
        self.settings = settings
        self.directory = directory
        self.problem: str | None = None  # why the cell is not registered (a refusal), if any

    @property
    def cell(self) -> str:
        return self.settings.cell

    @property
    def partitions(self) -> int:
        return self.settings.partitions

    def owned_partitions(self) -> range:
        """The partitions this cell serves once registered: its configured range."""
        return range(self.settings.first, self.settings.last + 1)

    def is_own(self, partition: int) -> bool:
        return self.settings.first <= partition <= self.settings.last

    def is_serving(self) -> bool:
        """True when the directory this node holds gives its cell its configured range, and
        no other (a node configured with another range than its cell's serves nothing)."""
        directory, s = self.directory, self.settings
        return (
            directory is not None
            and directory.partitions == s.partitions
            and directory.gives(s.cell, s.first, s.last)
        )

    def not_serving_reason(self) -> str | None:
        if self.is_serving():
            return None
        if self.problem is not None:
            return self.problem
        return (
            f"cell {self.cell} has not registered its partitions {self.settings.first}-"
            f"{self.settings.last} in the directory yet (cells.etcd)"
        )

    def check(self, partition: int) -> None:
        """Return when this node serves `partition`; else WrongCell (its owner) or
        ClusterUnavailable (no owner known, or this cell not registered)."""
        directory = self.directory
        owner = None if directory is None else directory.owner(partition)
        if owner is not None and owner.cell == self.cell and self.is_serving():
            return
        if owner is None or owner.cell == self.cell or directory is None:
            reason = self.not_serving_reason() if self.is_own(partition) else None
            raise ClusterUnavailable(reason or f"no cell serves partition {partition}")
        urls = directory.urls.get(owner.cell, ())
        if not urls:
            raise ClusterUnavailable(
                f"partition {partition} is served by cell {owner.cell}, which has registered "
                "no API URL yet"
            )
        raise WrongCell(
            partition=partition,
            cell=owner.cell,
            urls=urls,
            directory_revision=directory.revision,
        )

    def own_receipts(self, given: Sequence[str]) -> dict[str, str]:
        """Each receipt of `given` this cell handed out, to the receipt its store knows; the
        others are left out (never settled here). WrongCell when every one names one other
        cell; InvalidRequest when none names a cell (not handed out by a cell)."""
        own, others, unmarked = {}, set(), 0
        for receipt in given:
            cell, stored = receipts.split(receipt)
            if cell == self.cell:
                own[receipt] = stored
            elif cell is None:
                unmarked += 1
            else:
                others.add(cell)
        if own or not given:
            return own
        if unmarked == len(given):
            raise InvalidRequest(
                "receipts",
                f"were not handed out by a cell: cell {self.cell}'s start with '{self.cell}~'",
            )
        if len(others) == 1 and not unmarked:
            raise self._receipts_moved(others.pop())
        return own

    def _receipts_moved(self, cell: str) -> SchedError:
        """WrongCell naming `cell`'s URLs, for receipts it handed out."""
        directory = self.directory
        urls = () if directory is None else directory.urls.get(cell, ())
        if directory is None or not urls:
            return ClusterUnavailable(
                f"the receipts were handed out by cell {cell}, whose API URL this node does "
                "not know (yet)"
            )
        return WrongCell(
            partition=-1,
            cell=cell,
            urls=urls,
            directory_revision=directory.revision,
            message=f"the receipts were handed out by cell {cell}: settle them there",
        )

    def key_partition(self, tenant_id: str, key: str) -> int:
        return key_partition(tenant_id, key, self.partitions)

    def draw_job_id(self, new_id: Callable[[], str], *, partition: int | None = None) -> str:
        """An id from `new_id` in this cell's range, or in `partition` (a keyed job's)."""
        if partition is None:
            return draw_id(new_id, self.is_own, self.partitions)
        return draw_id(new_id, lambda p: p == partition, self.partitions)
