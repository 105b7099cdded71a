"""Keep this node's cell in the directory: register its range and API URL in etcd, then read
the directory and the cells' URLs again every few seconds into the CellView, keeping a local
copy so a restart while etcd is down serves from the last one read. Never raises out of its
loop: etcd's failures and refusals are logged and retried."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from schedd.cells.directory import (
    BadValue,
    Directory,
    DirectoryRefused,
    cell_value,
    parse_cell_urls,
    parse_directory,
    with_range,
)
from schedd.cells.etcd import Etcd, EtcdError
from schedd.cells.view import CellView

log = logging.getLogger(__name__)
REFRESH_EVERY_S = 2.0
RETRY_EVERY_S = 1.0
ETCD_TIMEOUT_S = 2.0
MERGE_ATTEMPTS = 5  # compare-and-set rounds per registration try, against concurrent writers


class DirectorySync:
    """Registers `url` for the view's cell and range, then refreshes the view; `save` keeps
    each new directory (the node writes it into its data directory)."""

    def __init__(
        self,
        view: CellView,
        url: str,
        save: Callable[[Directory], None],
        *,
        etcd: Etcd | None = None,
        refresh_every_s: float = REFRESH_EVERY_S,
    ) -> None:
        self.view = view
        self._url = url
        self._save = save
        self._etcd = etcd or Etcd(view.settings.etcd, timeout_s=ETCD_TIMEOUT_S)
        self._refresh_every_s = refresh_every_s
        self.is_registered = False

    @property
    def _prefix(self) -> str:
        return self.view.settings.prefix

    async def run(self) -> None:
        """Until cancelled: register, then refresh."""
        try:
            while True:
                await self.tick()
                wait_s = self._refresh_every_s if self.is_registered else RETRY_EVERY_S
                await asyncio.sleep(wait_s)
        finally:
            await self._etcd.close()

    async def tick(self) -> None:
        try:
            if not self.is_registered:
                await self.register()
            await self.refresh()
        except (EtcdError, BadValue) as exc:
            log.warning("cells: etcd unusable cell=%s error=%s", self.view.cell, exc)
        except DirectoryRefused as exc:
            self.view.problem = f"cell {self.view.cell} refused by the directory: {exc}"
            log.error("cells: not serving: %s", self.view.problem)

    async def register(self) -> None:
        """Add the cell's range to the directory and this node's URL to the cell's record,
        each by compare-and-set on the key's mod_revision."""
        s = self.view.settings
        for _ in range(MERGE_ATTEMPTS):
            found = await self._etcd.get(self._prefix + "directory")
            current = None if found is None else parse_directory(found.value)
            wanted = with_range(current, s.cell, s.first, s.last, s.partitions)
            if current is not None and wanted.ranges == current.ranges:
                break
            revision = 0 if found is None else found.mod_revision
            if await self._etcd.put_if(
                self._prefix + "directory", wanted.value(), mod_revision=revision
            ):
                log.info(
                    "cells: range registered cell=%s partitions=%d-%d", s.cell, s.first, s.last
                )
                break
        else:
            raise EtcdError("the directory kept changing while this cell registered")
        await self._register_url()
        self.view.problem = None
        self.is_registered = True

    async def _register_url(self) -> None:
        key = f"{self._prefix}cells/{self.view.cell}"
        for _ in range(MERGE_ATTEMPTS):
            found = await self._etcd.get(key)
            urls = () if found is None else parse_cell_urls(found.value)
            if self._url in urls:
                return
            revision = 0 if found is None else found.mod_revision
            if await self._etcd.put_if(key, cell_value((*urls, self._url)), mod_revision=revision):
                log.info("cells: url registered cell=%s url=%s", self.view.cell, self._url)
                return
        raise EtcdError(f"{key} kept changing while this node registered its URL")

    async def refresh(self) -> None:
        """Read the directory and every cell's URLs; a new one replaces the view's. One that
        no longer gives this cell its range makes the next tick register it again; one that
        does clears the view's problem."""
        found = await self._etcd.get(self._prefix + "directory")
        if found is None:
            raise BadValue("the directory key does not exist")
        read = parse_directory(found.value, revision=found.mod_revision)
        urls = {}
        for kv in await self._etcd.get_prefix(self._prefix + "cells/"):
            cell = kv.key[len(self._prefix + "cells/") :]
            try:
                urls[cell] = parse_cell_urls(kv.value)
            except BadValue as exc:  # one bad record costs its cell's redirects, no more
                log.warning("cells: bad record key=%s error=%s", kv.key, exc)
        directory = Directory(read.partitions, read.ranges, urls, found.mod_revision)
        if directory != self.view.directory:
            self.view.directory = directory
            if directory.partitions != self.view.partitions:
                self.view.problem = (
                    f"the directory has {directory.partitions} partitions, this node "
                    f"{self.view.partitions}"
                )
            await asyncio.to_thread(self._save, directory)
            log.info("cells: directory read revision=%d cells=%d", directory.revision, len(urls))
        if self.view.is_serving():
            self.view.problem = None
        elif self.is_registered:  # its range was taken out of etcd: compare-and-set it again
            log.warning("cells: range no longer in the directory cell=%s", self.view.cell)
            self.is_registered = False
