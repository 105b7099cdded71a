"""A cell keeping itself in the directory (schedd/cells/sync.py) against an etcd kept in
memory: registration by compare-and-set (concurrent cells and nodes), a refusal, etcd down."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from schedd.cells.directory import CellRange, Directory, parse_cell_urls, parse_directory
from schedd.cells.etcd import EtcdError, KeyValue
from schedd.cells.sync import DirectorySync
from schedd.cells.view import CellSettings, CellView
from schedd.config import CellsSettings, NodeConfig
from schedd.node import DIRECTORY_COPY_FILE, cell_view_for, keep_directory_copy


class MemoryEtcd:
    """etcd's few calls DirectorySync makes; `is_down` makes every call fail. Each put_if
    first lets `before_put` run, as another writer between a read and a write would."""

    def __init__(self) -> None:
        self.keys: dict[str, KeyValue] = {}
        self.revision = 0
        self.is_down = False
        self.before_put: list[tuple[str, bytes]] = []

    async def get(self, key: str) -> KeyValue | None:
        self._check()
        return self.keys.get(key)

    async def get_prefix(self, prefix: str) -> list[KeyValue]:
        self._check()
        return [kv for key, kv in sorted(self.keys.items()) if key.startswith(prefix)]

    async def put_if(self, key: str, value: bytes, *, mod_revision: int) -> bool:
        self._check()
        while self.before_put:
            self.put(*self.before_put.pop())
        found = self.keys.get(key)
        if (0 if found is None else found.mod_revision) != mod_revision:
            return False
        self.put(key, value)
        return True

    def put(self, key: str, value: bytes) -> None:
        self.revision += 1
        self.keys[key] = KeyValue(key, value, self.revision)

    async def close(self) -> None:
        pass

    def _check(self) -> None:
        if self.is_down:
            raise EtcdError("connection refused")


def sync_for(
    etcd: MemoryEtcd, cell: str, first: int, last: int, url: str, kept: list[Directory]
) -> DirectorySync:
    settings = CellSettings(
        cell=cell, first=first, last=last, partitions=1024, deployment="d", etcd=("http://e",)
    )
    return DirectorySync(CellView(settings), url, kept.append, etcd=etcd)  # type: ignore[arg-type]


def test_two_cells_register_and_each_node_reads_both() -> None:
    etcd, kept = MemoryEtcd(), list[Directory]()
    one = sync_for(etcd, "c1", 0, 511, "http://a:1", kept)
    two = sync_for(etcd, "c2", 512, 1023, "http://b:1", kept)
    asyncio.run(one.tick())
    asyncio.run(two.tick())
    asyncio.run(one.tick())
    assert one.view.is_serving() and two.view.is_serving()
    assert one.view.directory == two.view.directory
    directory = one.view.directory
    assert directory is not None
    assert directory.revision == etcd.keys["/schedd/d/directory"].mod_revision
    assert dict(directory.urls) == {"c1": ("http://a:1",), "c2": ("http://b:1",)}
    assert kept[-1] == directory  # the local copy


def test_a_write_between_read_and_put_is_read_again_not_lost() -> None:
    etcd, kept = MemoryEtcd(), list[Directory]()
    other = json.dumps({"partitions": 1024, "ranges": [{"first": 512, "last": 1023, "cell": "c2"}]})
    etcd.before_put.append(("/schedd/d/directory", other.encode()))
    etcd.before_put.append(("/schedd/d/cells/c1", b'{"urls": ["http://a:2"]}'))
    one = sync_for(etcd, "c1", 0, 511, "http://a:1", kept)
    asyncio.run(one.tick())
    ranges = parse_directory(etcd.keys["/schedd/d/directory"].value).ranges
    assert [(r.first, r.last, r.cell) for r in ranges] == [(0, 511, "c1"), (512, 1023, "c2")]
    urls = parse_cell_urls(etcd.keys["/schedd/d/cells/c1"].value)
    assert urls == ("http://a:1", "http://a:2")


def test_a_cell_refused_by_the_directory_does_not_serve_and_says_why() -> None:
    etcd, kept = MemoryEtcd(), list[Directory]()
    asyncio.run(sync_for(etcd, "c1", 0, 511, "http://a:1", kept).tick())
    late = sync_for(etcd, "c2", 500, 1023, "http://b:1", kept)
    asyncio.run(late.tick())
    assert not late.is_registered and not late.view.is_serving()
    reason = late.view.not_serving_reason()
    assert reason is not None and "cell c1 owns partitions 0-511" in reason


def test_with_etcd_down_a_cell_keeps_serving_from_the_directory_it_read() -> None:
    etcd, kept = MemoryEtcd(), list[Directory]()
    one = sync_for(etcd, "c1", 0, 511, "http://a:1", kept)
    asyncio.run(one.tick())
    etcd.is_down = True
    asyncio.run(one.tick())
    assert one.view.is_serving()
    restarted = CellView(one.view.settings, kept[-1])  # a restart from the local copy
    assert restarted.is_serving()


@pytest.mark.parametrize("value", [b"[]", b'{"partitions": 1024, "ranges": [{"first": 9}]}'])
def test_a_directory_key_schedd_did_not_write_is_logged_and_not_served(value: bytes) -> None:
    etcd, kept = MemoryEtcd(), list[Directory]()
    etcd.put("/schedd/d/directory", value)
    one = sync_for(etcd, "c1", 0, 511, "http://a:1", kept)
    asyncio.run(one.tick())
    assert not one.view.is_serving() and kept == []


def test_a_node_restarted_with_etcd_down_serves_from_its_data_dirs_copy(tmp_path: Path) -> None:
    config = NodeConfig(
        path=tmp_path / "n.toml",
        node_id="n1",
        data_dir=tmp_path,
        partitions=1024,
        partition_range=(0, 511),
        cells=CellsSettings(etcd=("http://e:1",), cell="c1"),
    )
    assert not view_of(config).is_serving()  # nothing read yet
    etcd, kept = MemoryEtcd(), list[Directory]()
    asyncio.run(sync_for(etcd, "c1", 0, 511, "http://a:1", kept).tick())
    keep_directory_copy(config, kept[-1])
    restarted = view_of(config)
    assert restarted.is_serving() and restarted.directory == kept[-1]
    (tmp_path / DIRECTORY_COPY_FILE).write_text("{not json")
    assert not view_of(config).is_serving()  # logged, and the node waits for etcd


def view_of(config: NodeConfig) -> CellView:
    found = cell_view_for(config)
    assert found is not None
    return found


def test_a_range_taken_out_of_etcd_is_registered_again() -> None:
    etcd, kept = MemoryEtcd(), list[Directory]()
    one = sync_for(etcd, "c1", 0, 511, "http://a:1", kept)
    asyncio.run(one.tick())
    etcd.put("/schedd/d/directory", Directory(1024, (CellRange(512, 1023, "c2"),)).value())
    asyncio.run(one.tick())
    assert not one.view.is_serving() and not one.is_registered
    asyncio.run(one.tick())
    assert one.view.is_serving() and one.view.not_serving_reason() is None
    ranges = parse_directory(etcd.keys["/schedd/d/directory"].value).ranges
    assert ranges == (CellRange(0, 511, "c1"), CellRange(512, 1023, "c2"))


def test_a_good_refresh_clears_a_refusal() -> None:
    etcd, kept = MemoryEtcd(), list[Directory]()
    etcd.put("/schedd/d/directory", Directory(1024, (CellRange(0, 1023, "c2"),)).value())
    one = sync_for(etcd, "c1", 0, 511, "http://a:1", kept)
    asyncio.run(one.tick())
    assert "refused" in (one.view.not_serving_reason() or "")
    etcd.put("/schedd/d/directory", Directory(1024, (CellRange(512, 1023, "c2"),)).value())
    asyncio.run(one.tick())
    assert one.view.is_serving() and one.view.problem is None


def test_a_node_of_a_cell_with_another_range_is_refused_and_says_why() -> None:
    etcd, kept = MemoryEtcd(), list[Directory]()
    asyncio.run(sync_for(etcd, "c1", 0, 511, "http://a:1", kept).tick())
    narrower = sync_for(etcd, "c1", 0, 255, "http://a:2", kept)
    asyncio.run(narrower.tick())
    assert not narrower.is_registered and not narrower.view.is_serving()
    reason = narrower.view.not_serving_reason() or ""
    assert "gives cell c1 partitions 0-511, this node is configured with 0-255" in reason
    ranges = parse_directory(etcd.keys["/schedd/d/directory"].value).ranges
    assert ranges == (CellRange(0, 511, "c1"),)  # not merged
