"""The directory of cells (schedd/cells/directory.py): its JSON read as hostile input, a cell's
range merged in or refused, the partition of a key, ids drawn into partitions; and a cell's
answer for a partition (schedd/cells/view.py)."""

from __future__ import annotations

import json
import secrets

import pytest

from schedd.cells import receipts
from schedd.cells.directory import (
    BadValue,
    CellRange,
    Directory,
    DirectoryRefused,
    cell_value,
    draw_id,
    key_partition,
    parse_cell_urls,
    parse_directory,
    parse_local_copy,
    with_range,
)
from schedd.cells.view import CellSettings, CellView
from schedd.errors import ClusterUnavailable, WrongCell
from schedd.model import partition_of

C1, C2 = CellRange(0, 511, "c1"), CellRange(512, 1023, "c2")
URLS = {"c1": ("http://a:1",), "c2": ("http://b:1", "http://b:2")}


def directory(*ranges: CellRange, revision: int = 7) -> Directory:
    return Directory(1024, tuple(sorted(ranges)), URLS, revision)


def test_the_first_cell_creates_the_directory_and_the_second_adds_its_range() -> None:
    first = with_range(None, "c1", 0, 511, 1024)
    assert first.ranges == (C1,)
    both = with_range(parse_directory(first.value()), "c2", 512, 1023, 1024)
    assert both.ranges == (C1, C2)
    assert parse_directory(both.value()).ranges == (C1, C2)


def test_a_cell_registering_again_keeps_its_one_range() -> None:
    assert with_range(directory(C1), "c1", 0, 511, 1024).ranges == (C1,)
    halves = Directory(1024, (CellRange(0, 255, "c1"), CellRange(256, 511, "c1")))
    assert with_range(halves, "c1", 0, 511, 1024).ranges == (C1,)


@pytest.mark.parametrize(("first", "last"), [(0, 255), (512, 600), (0, 600)])
def test_a_node_configured_with_another_range_than_its_cells_is_refused(
    first: int, last: int
) -> None:
    with pytest.raises(DirectoryRefused, match="gives cell c1 partitions 0-511, this node is"):
        with_range(directory(C1), "c1", first, last, 1024)


@pytest.mark.parametrize(("first", "last"), [(0, 511), (511, 511), (100, 700), (0, 1023)])
def test_a_range_overlapping_another_cells_is_refused(first: int, last: int) -> None:
    with pytest.raises(DirectoryRefused, match="cell c1 owns partitions 0-511"):
        with_range(directory(C1), "c2", first, last, 1024)


def test_a_directory_of_another_partition_count_is_refused() -> None:
    with pytest.raises(DirectoryRefused, match="1024 partitions, this node 2048"):
        with_range(directory(C1), "c2", 1024, 2047, 2048)


def test_owner_and_covers_follow_the_ranges() -> None:
    gap = directory(CellRange(0, 99, "c1"), CellRange(200, 299, "c2"))
    assert gap.owner(0) == gap.owner(99) == CellRange(0, 99, "c1")
    assert gap.owner(100) is None and gap.owner(300) is None
    assert gap.owner(250) == CellRange(200, 299, "c2")
    assert gap.covers("c1", 0, 99) and not gap.covers("c1", 0, 100)
    split = directory(CellRange(0, 9, "c1"), CellRange(10, 10, "c2"), CellRange(11, 20, "c1"))
    assert not split.covers("c1", 0, 20) and split.covers("c1", 11, 20)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"[]",
        b"not json",
        b"\xff\xfe",
        b'{"partitions": true, "ranges": []}',
        b'{"partitions": 0, "ranges": []}',
        b'{"partitions": 1024}',
        b'{"partitions": 1024, "ranges": {}}',
        b'{"partitions": 1024, "ranges": [1]}',
        b'{"partitions": 1024, "ranges": [{"first": 0, "last": 1024, "cell": "c1"}]}',
        b'{"partitions": 1024, "ranges": [{"first": 5, "last": 4, "cell": "c1"}]}',
        b'{"partitions": 1024, "ranges": [{"first": 0, "last": 4, "cell": "C 1"}]}',
        b'{"partitions": 1024, "ranges": [{"first": "0", "last": 4, "cell": "c1"}]}',
        b'{"partitions": 1024, "ranges": [{"first": 0, "last": 9, "cell": "c1"},'
        b' {"first": 9, "last": 20, "cell": "c2"}]}',
        json.dumps({"partitions": 1024, "ranges": [], "pad": "x" * 300_000}).encode(),
    ],
)
def test_a_directory_value_that_schedd_does_not_write_is_bad(raw: bytes) -> None:
    with pytest.raises(BadValue):
        parse_directory(raw)


@pytest.mark.parametrize(
    "raw",
    [b"{}", b'{"urls": "http://a"}', b'{"urls": ["ftp://a"]}', b'{"urls": [1]}', b"[]"],
)
def test_a_cell_record_that_schedd_does_not_write_is_bad(raw: bytes) -> None:
    with pytest.raises(BadValue):
        parse_cell_urls(raw)


def test_a_cell_record_keeps_each_url_once() -> None:
    assert parse_cell_urls(cell_value(["http://b:2", "http://a:1", "http://b:2"])) == (
        "http://a:1",
        "http://b:2",
    )


def test_the_local_copy_round_trips_with_its_urls_and_revision() -> None:
    kept = directory(C1, C2, revision=41)
    assert parse_local_copy(json.dumps(kept.to_json()).encode()) == kept


def test_a_keys_partition_is_stable_and_per_tenant() -> None:
    assert key_partition("t1", "daily", 1024) == key_partition("t1", "daily", 1024)
    spread = {key_partition(f"t{n}", "daily", 1024) for n in range(200)}
    assert len(spread) > 150


def test_ids_are_drawn_into_the_wanted_partitions() -> None:
    def new_id() -> str:
        return f"job_{secrets.token_hex(6)}"

    for _ in range(20):
        assert partition_of(draw_id(new_id, lambda p: p >= 512, 1024), 1024) >= 512
    assert partition_of(draw_id(new_id, lambda p: p == 733, 1024), 1024) == 733
    with pytest.raises(RuntimeError):
        draw_id(new_id, lambda p: False, 16)


def view(known: Directory | None) -> CellView:
    settings = CellSettings(
        cell="c1", first=0, last=511, partitions=1024, deployment="d", etcd=("http://e:1",)
    )
    return CellView(settings, known)


def test_a_cell_serves_its_own_partitions_and_redirects_the_others() -> None:
    cells = view(directory(C1, C2, revision=4182))
    assert cells.is_serving()
    cells.check(0)
    cells.check(511)
    with pytest.raises(WrongCell) as raised:
        cells.check(733)
    assert str(raised.value) == "partition 733 is served by cell c2"
    assert (raised.value.cell, raised.value.urls) == ("c2", URLS["c2"])
    assert raised.value.directory_revision == 4182


def test_a_partition_no_cell_owns_or_a_cell_not_registered_is_unavailable() -> None:
    with pytest.raises(ClusterUnavailable, match="no cell serves partition 733"):
        view(directory(C1)).check(733)
    unregistered = view(directory(C2))
    assert not unregistered.is_serving()
    with pytest.raises(ClusterUnavailable, match="has not registered"):
        unregistered.check(5)
    with pytest.raises(ClusterUnavailable, match="has not registered"):
        view(None).check(5)


def test_a_cell_that_registered_no_url_yet_is_unavailable_not_a_redirect() -> None:
    cells = view(Directory(1024, (C1, C2), {"c1": URLS["c1"]}, 3))
    with pytest.raises(ClusterUnavailable, match="registered no API URL yet"):
        cells.check(600)


def test_a_cell_draws_unkeyed_ids_in_its_range_and_keyed_ones_in_the_keys_partition() -> None:
    cells = view(directory(C1, C2))

    def new_id() -> str:
        return f"job_{secrets.token_hex(6)}"

    assert all(partition_of(cells.draw_job_id(new_id), 1024) <= 511 for _ in range(50))
    partition = cells.key_partition("t1", "k")
    assert partition_of(cells.draw_job_id(new_id, partition=partition), 1024) == partition


def test_a_receipt_names_the_cell_that_handed_it_out_and_a_stores_receipt_none() -> None:
    assert receipts.split(receipts.marked("c1", "abc-0.~12.3")) == ("c1", "abc-0.~12.3")
    assert receipts.split("c-2~x~y") == ("c-2", "x~y")
    for bare in ("abc-0.~12.3", "abc-0.job_1:2", "Xy_z-0.~1.0"):  # a "." comes before any "~"
        assert receipts.split(bare) == (None, bare)
