"""The directory of cells: its JSON form in etcd, read as hostile input; the merge of a cell's
range into it (refused when another cell owns part of it); the partition of a job's key; ids
drawn into a partition. Pure: no network, no clock."""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from schedd.model import partition_of

MAX_VALUE_BYTES = 256 * 1024  # a directory or a cell's record read from etcd, at most
MAX_RANGES = 4096
MAX_URLS = 64
MAX_URL_CHARS = 300
_CELL = re.compile(r"[a-z0-9-]{1,32}")
_URL = re.compile(r"https?://[A-Za-z0-9_.:\[\]-]{1,260}", re.ASCII)


class DirectoryRefused(Exception):
    """The directory cannot take this cell's range: another cell owns part of it, or its
    partition count differs from this node's."""


class BadValue(ValueError):
    """A value read from etcd that is not what schedd writes there."""


@dataclass(frozen=True, slots=True, order=True)
class CellRange:
    """Partitions first..last (inclusive) owned by `cell`."""

    first: int
    last: int
    cell: str

    def to_json(self) -> dict[str, object]:
        return {"first": self.first, "last": self.last, "cell": self.cell}


@dataclass(frozen=True, slots=True)
class Directory:
    """Who owns which partitions (the `directory` key: its ranges, sorted, never overlapping),
    the cells' API URLs (the `cells/<cell>` keys), and the directory key's mod_revision."""

    partitions: int
    ranges: tuple[CellRange, ...]
    urls: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    revision: int = 0
    _firsts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_firsts", tuple(r.first for r in self.ranges))

    def owner(self, partition: int) -> CellRange | None:
        """The range holding `partition`, or None when no cell owns it."""
        k = bisect.bisect_right(self._firsts, partition) - 1
        if k >= 0 and self.ranges[k].first <= partition <= self.ranges[k].last:
            return self.ranges[k]
        return None

    def cells(self) -> list[str]:
        """Every cell named by a range, in the order of their first range."""
        return list(dict.fromkeys(r.cell for r in self.ranges))

    def ranges_of(self, cell: str) -> list[tuple[int, int]]:
        return [(r.first, r.last) for r in self.ranges if r.cell == cell]

    def gives(self, cell: str, first: int, last: int) -> bool:
        """True when `cell` owns first..last and nothing else."""
        return _union(self.ranges_of(cell)) == [(first, last)]

    def covers(self, cell: str, first: int, last: int) -> bool:
        """True when `cell` owns every partition of first..last."""
        return all(
            (owner := self.owner(p)) is not None and owner.cell == cell
            for p in _range_edges(self.ranges, first, last)
        )

    def value(self) -> bytes:
        """The `directory` key's value."""
        body = {"partitions": self.partitions, "ranges": [r.to_json() for r in self.ranges]}
        return json.dumps(body, separators=(",", ":")).encode()

    def to_json(self) -> dict[str, object]:
        """The whole view (the node's local copy): the key's value, the URLs and the revision."""
        return {
            "partitions": self.partitions,
            "ranges": [r.to_json() for r in self.ranges],
            "urls": {cell: list(urls) for cell, urls in sorted(self.urls.items())},
            "revision": self.revision,
        }


def _range_edges(ranges: Iterable[CellRange], first: int, last: int) -> list[int]:
    """The partitions where ownership may change within first..last: its ends and every range
    boundary inside it (checking those checks the whole span)."""
    edges = {first, last}
    for r in ranges:
        for p in (r.first - 1, r.first, r.last, r.last + 1):
            if first <= p <= last:
                edges.add(p)
    return sorted(edges)


def parse_directory(raw: bytes, *, revision: int = 0) -> Directory:
    """The `directory` key's value; BadValue for anything else (too big, not JSON, ranges out
    of bounds or overlapping)."""
    body = _object(raw)
    partitions = _int(body.get("partitions"), "directory.partitions")
    ranges = body.get("ranges")
    if not 1 <= partitions <= 65_536:
        raise BadValue("directory.partitions must be an integer 1..65536")
    if not isinstance(ranges, list) or len(ranges) > MAX_RANGES:
        raise BadValue(f"directory.ranges must be a list of at most {MAX_RANGES}")
    parsed = sorted(_cell_range(item, partitions) for item in ranges)
    for a, b in itertools.pairwise(parsed):
        if b.first <= a.last:
            raise BadValue(f"directory ranges overlap: {a.first}-{a.last} and {b.first}-{b.last}")
    return Directory(partitions=partitions, ranges=tuple(parsed), revision=revision)


def _cell_range(item: object, partitions: int) -> CellRange:
    if not isinstance(item, dict):
        raise BadValue("directory.ranges items must be objects")
    first, last = _int(item.get("first"), "range.first"), _int(item.get("last"), "range.last")
    cell = item.get("cell")
    if not 0 <= first <= last < partitions:
        raise BadValue(f"directory range must have 0 <= first <= last < {partitions}")
    if not isinstance(cell, str) or not _CELL.fullmatch(cell):
        raise BadValue("directory range's cell must be 1-32 of a-z 0-9 -")
    return CellRange(first, last, cell)


def parse_cell_urls(raw: bytes) -> tuple[str, ...]:
    """A `cells/<cell>` key's value: {"urls": [...]}; BadValue for anything else."""
    urls = _object(raw).get("urls")
    if not isinstance(urls, list) or len(urls) > MAX_URLS:
        raise BadValue(f"a cell's urls must be a list of at most {MAX_URLS}")
    for url in urls:
        if not isinstance(url, str) or len(url) > MAX_URL_CHARS or not _URL.fullmatch(url):
            raise BadValue("a cell's urls must be http:// or https:// base URLs")
    return tuple(urls)


def cell_value(urls: Iterable[str]) -> bytes:
    return json.dumps({"urls": sorted(set(urls))}, separators=(",", ":")).encode()


def with_range(
    current: Directory | None, cell: str, first: int, last: int, count: int
) -> Directory:
    """The directory with first..last owned by `cell`; DirectoryRefused if another cell owns
    any of it, the counts differ, or the directory gives `cell` other partitions already (a
    node configured with another range than its cell's)."""
    if current is None:
        return Directory(partitions=count, ranges=(CellRange(first, last, cell),))
    if current.partitions != count:
        raise DirectoryRefused(
            f"the directory has {current.partitions} partitions, this node {count} "
            "(cells.partitions)"
        )
    for r in current.ranges:
        if r.cell != cell and r.first <= last and first <= r.last:
            raise DirectoryRefused(
                f"cell {r.cell} owns partitions {r.first}-{r.last}, which overlap this cell's "
                f"{first}-{last}"
            )
    given = current.ranges_of(cell)
    if given and _union(given) != [(first, last)]:
        shown = ", ".join(f"{a}-{b}" for a, b in _union(given))
        raise DirectoryRefused(
            f"the directory gives cell {cell} partitions {shown}, this node is configured with "
            f"{first}-{last} ([cluster] partitions): every node of a cell has the same range"
        )
    others = [r for r in current.ranges if r.cell != cell]
    merged = [CellRange(a, b, cell) for a, b in _union([*given, (first, last)])]
    return Directory(partitions=count, ranges=tuple(sorted(others + merged)), urls=current.urls)


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def key_partition(tenant_id: str, key: str, partitions: int) -> int:
    """The partition of a tenant's job key: a stable hash of (tenant_id, key)."""
    digest = hashlib.blake2b(f"{tenant_id}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions


def draw_id(new_id: Callable[[], str], fits: Callable[[int], bool], partitions: int) -> str:
    """An id from `new_id` whose partition `fits`: drawn again until one does (about
    partitions / the fitting share draws). RuntimeError past a bound no fitting set reaches."""
    for _ in range(64 * partitions):
        candidate = new_id()
        if fits(partition_of(candidate, partitions)):
            return candidate
    raise RuntimeError("no id drawn into the wanted partitions")


def _object(raw: bytes) -> dict[str, object]:
    if len(raw) > MAX_VALUE_BYTES:
        raise BadValue(f"value over {MAX_VALUE_BYTES} bytes")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise BadValue("value is not JSON") from None
    if not isinstance(body, dict):
        raise BadValue("value is not a JSON object")
    return body


def _int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadValue(f"{what} must be an integer")
    return value


def parse_local_copy(raw: bytes) -> Directory:
    """The node's local copy (Directory.to_json): its directory, URLs and revision."""
    body = _object(raw)
    revision = _int(body.get("revision"), "revision")
    urls = body.get("urls")
    if not isinstance(urls, dict):
        raise BadValue("local directory copy lacks urls")
    directory = parse_directory(raw, revision=revision)
    checked = {
        cell: parse_cell_urls(json.dumps({"urls": value}).encode())
        for cell, value in urls.items()
        if isinstance(cell, str) and _CELL.fullmatch(cell)
    }
    return Directory(directory.partitions, directory.ranges, checked, revision)
