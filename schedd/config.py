"""A node's TOML configuration: read, check and resolve it into one frozen `NodeConfig`.

Every setting is declared once, as a field of `NodeConfig` or of a section it holds (`ApiLimits`,
`Retention`): its key, its parser (type and bounds), its default and a line of doc. The keys the
file may hold (`SETTINGS`, `KEYS`, `SCHEMA`), the defaults of a `NodeConfig` built directly and
the loader are derived from those fields; docs/configuration.md lists the same keys with the same
defaults (tests/unit/test_config_docs.py holds them together).

Every problem is a `ConfigError` naming the file, the `section.key` and the bad value (never a
secret). Reads files and the environment only; starts nothing.
"""

# RUF009 reads `x: T = setting(...)` as a default computed once and shared; setting() and
# section() return dataclasses.field(...) specifiers (a section's default is a factory).
# ruff: noqa: RUF009

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from schedd.errors import ConfigError, InvalidRequest
from schedd.retention import MIN_RETENTION_MS, Retention
from schedd.storage import MinFree
from schedd.timeformat import parse_duration

_T = TypeVar("_T")

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
RAFT_SECRET_ENV = "SCHEDD_RAFT_SECRET"
ADMIN_TOKEN_ENV = "SCHEDD_ADMIN_TOKEN"
METRICS_TOKEN_ENV = "SCHEDD_METRICS_TOKEN"
MIN_SECRET_CHARS = 16
MIN_PAYLOAD_BYTES = 1024
MAX_PAYLOAD_BYTES = 512 * 1024  # sealed and in its job, it must fit one 1 MiB Raft command
MAX_PARTITIONS = 65_536

DEFAULT_CELL_PARTITIONS = 1024  # [cells] partitions: the count a cell's range lies in

_NODE_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_CELL = re.compile(r"[a-z0-9-]{1,32}")
_PARTITION_RANGE = re.compile(r"\s*(\d{1,5})\s*-\s*(\d{1,5})\s*", re.ASCII)
# re.ASCII: \d would otherwise accept non-ASCII digits such as Arabic-Indic ones.
_LISTEN = re.compile(r"(?:\[(?P<v6>[^\[\]]+)\]|(?P<host>[^:\[\]]+)):(?P<port>\d{1,5})", re.ASCII)
_HOSTNAME = re.compile(r"[A-Za-z0-9_.-]{1,253}")
_SIZE = re.compile(r"(\d{1,12})\s*(B|KiB|MiB|GiB|KB|MB|GB)?", re.ASCII)
_SIZE_UNITS = {
    "B": 1,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
}
_PERCENT = re.compile(r"(\d{1,2}(?:\.\d{1,2})?)\s*%", re.ASCII)


# -- how a setting is declared -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Source:
    """What a parser may read besides the value it is given: the whole file (a secret's
    `_file` key), the file's folder (relative paths) and the environment (overrides)."""

    doc: Mapping[str, Mapping[str, object]]
    base: Path
    env: Mapping[str, str]

    def value(self, key: str) -> object | None:
        section, name = key.split(".")
        return self.doc.get(section, {}).get(name)  # TOML has no null: None means "not given"


# A given TOML value, its "section.key" and the Source -> the field's value, or a ConfigError.
Parser = Callable[[object, str, Source], _T]


@dataclass(frozen=True, slots=True)
class Setting:
    """One key of the file, as the field that holds it declares it."""

    key: str  # "section.key"
    parse: Parser[object]
    default: object  # the field's value when the key is not given; MISSING: the key is required
    doc: str
    companions: tuple[str, ...] = ()  # keys `parse` reads itself: raft.secret -> secret_file
    always: bool = False  # `parse` runs (with None) when the key is not given: env, required

    @property
    def section(self) -> str:
        return self.key.partition(".")[0]

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.key, *self.companions)

    @property
    def is_required(self) -> bool:
        return self.default is MISSING


@dataclass(frozen=True, slots=True)
class Section:
    """A field holding a typed object built from several settings (`ApiLimits`, `Retention`)."""

    build: Callable[..., object]
    settings: tuple[tuple[str, Setting], ...]  # (the object's attribute, its setting)


_ABOUT = "schedd.config"  # the field metadata that holds a Setting or a Section


def setting(
    key: str,
    parse: Parser[_T],
    default: _T,
    doc: str,
    *,
    companions: tuple[str, ...] = (),
    always: bool = False,
    is_secret: bool = False,
) -> _T:
    """A field that holds the setting `key`: `max_body_reads: int = setting(...)`."""
    about = Setting(key, parse, default, doc, companions, always)
    return dataclasses.field(default=default, repr=not is_secret, metadata={_ABOUT: about})


def required(key: str, parse: Parser[Any], doc: str) -> Mapping[str, Setting]:
    """The metadata of a required setting's field: `node_id: str = field(metadata=required(...))`
    (a plain `field()` call, so type checkers know the field has no default)."""
    return {_ABOUT: Setting(key, parse, MISSING, doc, always=True)}


def section(kind: Callable[[], _T], settings: Iterable[tuple[str, Setting]] = ()) -> _T:
    """A field holding a `kind` built from its settings: by default the fields of `kind` that
    are declared with `setting()`; `section_of` names them for a class declared elsewhere."""
    found = tuple(settings) or tuple(_fields_of(kind))
    about = Section(kind, found)
    return dataclasses.field(default_factory=kind, metadata={_ABOUT: about})


def section_of(kind: Callable[[], _T], name: str, parse: Parser[Any], doc: str) -> _T:
    """A section whose class lives in a lower module (`Retention`): every field of `kind` is
    the key `name.field`, parsed by `parse`, defaulting to the field's own default."""
    settings = [
        (f.name, Setting(f"{name}.{f.name}", parse, f.default, doc.format(key=f.name)))
        for f in dataclasses.fields(cast(Any, kind))
    ]
    return section(kind, settings)


def _fields_of(kind: object) -> Iterator[tuple[str, Setting]]:
    for f in dataclasses.fields(cast(Any, kind)):
        about = f.metadata.get(_ABOUT)
        if isinstance(about, Setting):
            yield f.name, about


# -- parsers ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Integer:
    """A whole number in low..high (never a boolean)."""

    low: int
    high: int

    def __call__(self, value: object, key: str, source: Source) -> int:
        number = _typed(value, int, field=key, what="an integer")
        if not self.low <= number <= self.high:
            raise ConfigError(f"{key} must be {self.low}..{self.high}, got {number!r}")
        return number


@dataclass(frozen=True, slots=True)
class Milliseconds:
    """A duration ("90s", "2h", 2.5) of at least `minimum_ms`, in milliseconds."""

    minimum_ms: int

    def __call__(self, value: object, key: str, source: Source) -> int:
        try:
            return parse_duration(value, field=key, minimum_ms=self.minimum_ms)
        except InvalidRequest as exc:
            raise ConfigError(f"{key} {exc.reason}") from None


@dataclass(frozen=True, slots=True)
class Seconds:
    """A duration of at least `minimum_ms`, in seconds."""

    minimum_ms: int

    def __call__(self, value: object, key: str, source: Source) -> float:
        return Milliseconds(self.minimum_ms)(value, key, source) / 1_000


@dataclass(frozen=True, slots=True)
class Choice:
    """One of a few strings."""

    choices: tuple[str, ...]

    def __call__(self, value: object, key: str, source: Source) -> str:
        text = _typed(value, str, field=key, what="a string")
        if text not in self.choices:
            raise ConfigError(f"{key} must be one of {', '.join(self.choices)}, got {text!r}")
        return text


@dataclass(frozen=True, slots=True)
class Secret:
    """`key` or the file `key`_file (stripped), overridden by the variable `env`; at least
    MIN_SECRET_CHARS characters."""

    env: str

    def __call__(self, value: object, key: str, source: Source) -> str | None:
        file_key = f"{key}_file"
        inline = None if value is None else _typed(value, str, field=key, what="a string")
        file_name = _optional_text(source.value(file_key), file_key)
        if inline is not None and file_name is not None:
            raise ConfigError(f"give {key} or {file_key}, not both")
        from_env = source.env.get(self.env, "").strip()  # an empty variable counts as unset
        if from_env:
            return _long_enough(from_env, source=self.env)
        if file_name is not None:
            secret = _read_secret_file(source.base, file_name, field=file_key)
            return _long_enough(secret, source=f"{file_key} {file_name!r}")
        return None if inline is None else _long_enough(inline.strip(), source=key)


def _flag(value: object, key: str, source: Source) -> bool:
    return _typed(value, bool, field=key, what="true or false")


def _text(value: object, key: str, source: Source) -> str:
    return _typed(value, str, field=key, what="a string")


def _optional_text(value: object, key: str) -> str | None:
    return None if value is None else _typed(value, str, field=key, what="a string")


def _required_text(value: object, key: str) -> str:
    if value is None:
        raise ConfigError(f"{key} is required")
    text = _typed(value, str, field=key, what="a string")
    if not text.strip():
        raise ConfigError(f"{key} must not be empty, got {text!r}")
    return text


def _node_id(value: object, key: str, source: Source) -> str:
    node_id = _required_text(value, key)
    if not _NODE_ID.fullmatch(node_id):
        raise ConfigError(f"{key} must be 1-64 of A-Z a-z 0-9 _ . -, got {node_id!r}")
    return node_id


def _directory(value: object, key: str, source: Source) -> Path:
    return _resolve(source.base, _required_text(value, key))


def _path(value: object, key: str, source: Source) -> Path:
    return _resolve(source.base, _text(value, key, source))


def _listen(value: object, key: str, source: Source) -> str:
    return join_listen(*parse_listen(_text(value, key, source), field=key))


def _peers(value: object, key: str, source: Source) -> tuple[str, ...]:
    return tuple(join_listen(*parse_listen(peer, field=key)) for peer in _strings(value, key))


def _cidrs(value: object, key: str, source: Source) -> tuple[str, ...]:
    networks = []
    for cidr in _strings(value, key):
        try:
            networks.append(str(ipaddress.ip_network(cidr, strict=False)))
        except ValueError:
            raise ConfigError(f"{key} must hold networks like '10.0.0.0/8', got {cidr!r}") from None
    return tuple(networks)


def _payload_limit(value: object, key: str, source: Source) -> int:
    size = _size(value, key, "64KiB")
    if not MIN_PAYLOAD_BYTES <= size <= MAX_PAYLOAD_BYTES:
        raise ConfigError(
            f"{key} must be 1KiB..512KiB (a job must fit one Raft command), got {value!r}"
        )
    return size


def _min_free(value: object, key: str, source: Source) -> MinFree:
    percent = _PERCENT.fullmatch(value.strip()) if isinstance(value, str) else None
    if percent:
        return MinFree(percent=float(percent[1]))
    return MinFree(bytes=_size(value, key, "1GiB' or '5%"))


def _partitions(value: object, key: str, source: Source) -> int:
    """The partition count: the integer given, or with a range ("0-511", a cell's share) the
    count of [cells] partitions that the range lies in."""
    if isinstance(value, str):
        if _PARTITION_RANGE.fullmatch(value) is None:
            raise ConfigError(
                f"{key} must be an integer, got {value!r}; a cell's range is a string "
                f'"first-last" such as "0-511" (with [cells] etcd)'
            )
        count = source.value("cells.partitions")
        return DEFAULT_CELL_PARTITIONS if count is None else _cell_partitions(count, source)
    return Integer(1, MAX_PARTITIONS)(value, key, source)


def _cell_partitions(value: object, source: Source) -> int:
    return Integer(1, MAX_PARTITIONS)(value, "cells.partitions", source)


def partition_range(value: object) -> tuple[int, int] | None:
    """The (first, last) of a `cluster.partitions` range string, or None for a count."""
    match = _PARTITION_RANGE.fullmatch(value) if isinstance(value, str) else None
    return None if match is None else (int(match[1]), int(match[2]))


def _etcd_endpoints(value: object, key: str, source: Source) -> tuple[str, ...]:
    endpoints = _strings(value, key)
    for url in endpoints:
        if not re.fullmatch(r"https?://[A-Za-z0-9_.:\[\]-]{1,260}/?", url, re.ASCII):
            raise ConfigError(f"{key} must hold http:// or https:// URLs of etcd, got {url!r}")
    return tuple(url.rstrip("/") for url in endpoints)


def _cell_name(value: object, key: str, source: Source) -> str:
    name = _text(value, key, source)
    if not _CELL.fullmatch(name):
        raise ConfigError(f"{key} must be 1-32 of a-z 0-9 -, got {name!r}")
    return name


# -- the settings --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CellsSettings:
    """The `[cells]` settings: where the directory of cells lives (etcd) and this node's cell
    (docs/scaling.md §4). Only with a range in `cluster.partitions`; none: one cell owns
    every partition and etcd is never asked."""

    etcd: tuple[str, ...] = setting(
        "cells.etcd", _etcd_endpoints, (), "etcd's client URLs, where the directory lives"
    )
    cell: str | None = setting("cells.cell", _cell_name, None, "this node's cell: 1-32 a-z 0-9 -")
    deployment: str = setting(
        "cells.deployment", _cell_name, "default", "its keys' prefix in etcd: /schedd/<this>/"
    )
    partitions: int = setting(
        "cells.partitions",
        Integer(1, MAX_PARTITIONS),
        DEFAULT_CELL_PARTITIONS,
        "the partition count the cells' ranges share",
    )
    etcd_cacert: Path | None = setting(
        "cells.etcd_cacert", _path, None, "the CAs that verify etcd's https:// certificates"
    )
    etcd_cert: Path | None = setting(
        "cells.etcd_cert", _path, None, "with etcd_key: this node's client certificate for etcd"
    )
    etcd_key: Path | None = setting("cells.etcd_key", _path, None, "its private key")

    @property
    def has_etcd_tls(self) -> bool:
        """True when a CA or a client certificate for etcd is configured."""
        return any(p is not None for p in (self.etcd_cacert, self.etcd_cert, self.etcd_key))


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiLimits:
    """The `[api]` limits on what clients may hold of the node (api/limits.py enforces them)."""

    header_timeout_s: float = setting(
        "api.header_timeout",
        Seconds(minimum_ms=100),
        15.0,
        "request line and headers, from connect or the last answer; also the keep-alive idle",
    )
    body_timeout_s: float = setting(
        "api.body_timeout",
        Seconds(minimum_ms=100),
        30.0,
        "a whole request body, from the handler's first read (then 408)",
    )
    max_body_reads: int = setting(
        "api.max_body_reads",
        Integer(1, 100_000),
        64,
        "request bodies being read at once, node-wide (then 503 server_busy)",
    )
    long_polls_per_tenant: int = setting(
        "api.long_polls_per_tenant",
        Integer(1, 100_000),
        32,
        "receives with a `wait` in progress, per tenant, on this node (then 429)",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliverySettings:
    """The `[delivery]` settings: which private networks targets may reach, payload sizes, and
    how many callbacks a node makes at once (node.py hands them to the guard, the API and the
    caller)."""

    allow_cidrs: tuple[str, ...] = setting(
        "delivery.allow_cidrs", _cidrs, (), "private networks HTTP targets may reach anyway"
    )
    payload_limit_bytes: int = setting(
        "delivery.payload_limit", _payload_limit, 65_536, "largest job payload, 1KiB..512KiB"
    )
    concurrency: int = setting(
        "delivery.concurrency", Integer(1, 10_000), 512, "HTTP callbacks at once, on this node"
    )
    tenant_concurrency: int = setting(
        "delivery.tenant_concurrency", Integer(1, 10_000), 64, "of those, per tenant"
    )
    secret_overlap_ms: int = setting(
        "delivery.secret_overlap",
        Milliseconds(minimum_ms=0),
        86_400_000,
        "callbacks carry the old and new signing secret this long after a rotation",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchSettings:
    """The `[dispatch]` settings: partition leases, the misfire line and the clock guard's
    bound (the dispatch package takes its defaults from here: `DispatchSettings()`)."""

    lease_ttl_ms: int = setting(
        "dispatch.lease_ttl", Milliseconds(minimum_ms=2_000), 5_000, "a partition lease's life"
    )
    misfire_threshold_ms: int = setting(
        "dispatch.misfire_threshold",
        Milliseconds(minimum_ms=1_000),
        60_000,
        "later than this, a run follows its job's misfire_policy",
    )
    max_clock_offset_ms: int = setting(
        "dispatch.max_clock_offset",
        Milliseconds(minimum_ms=50),
        500,
        "past this offset from the peers' clocks, the node stops dispatching",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeConfig:
    """One node's settings, checked; durations in seconds or ms as named, sizes in bytes, paths
    absolute, addresses as canonical "host:port". Each field below that is a setting declares
    its key, parser, default and doc: the one place a setting is declared."""

    path: Path  # the config file itself; not a setting
    # [node]
    node_id: str = dataclasses.field(
        metadata=required("node.id", _node_id, "unique in the cluster: 1-64 of A-Z a-z 0-9 _ . -")
    )
    data_dir: Path = dataclasses.field(
        metadata=required("node.data_dir", _directory, "SQLite, the Raft journal and snapshots")
    )
    log_level: str = setting("node.log_level", Choice(LOG_LEVELS), "info", "the lowest logged")
    # [api]
    api_listen: str = setting(
        "api.listen", _listen, "127.0.0.1:8701", "the HTTP API (and /metrics without its own)"
    )
    request_timeout_s: float = setting(
        "api.request_timeout", Seconds(minimum_ms=1), 5.0, "longest a request may take"
    )
    api_limits: ApiLimits = section(ApiLimits)
    tls_cert: Path | None = setting(
        "api.tls_cert", _path, None, "with tls_key: HTTPS only (schedd/tls.py)"
    )
    tls_key: Path | None = setting("api.tls_key", _path, None, "the certificate's private key")
    tls_ca: Path | None = setting(
        "api.tls_ca", _path, None, "the CAs that verify the peers' API certificates"
    )
    # [raft]
    raft_listen: str = setting(
        "raft.listen", _listen, "127.0.0.1:9701", "this node's Raft address, the only one bound"
    )
    raft_peers: tuple[str, ...] = setting(
        "raft.peers", _peers, (), "the OTHER nodes' Raft addresses; none: a single node"
    )
    raft_secret: str | None = setting(
        "raft.secret",
        Secret(RAFT_SECRET_ENV),
        None,
        "encrypts and authenticates Raft traffic",
        companions=("raft.secret_file",),
        always=True,
        is_secret=True,
    )
    compaction_min_entries: int = setting(
        "raft.compaction_min_entries", Integer(1, 10**9), 10_000, "compact past this many entries"
    )
    compaction_min_time_s: float = setting(
        "raft.compaction_min_time",
        Seconds(minimum_ms=1_000),
        300.0,
        "or when this long has passed since the last compaction",
    )
    election_timeout_min_s: float = setting(
        "raft.election_timeout_min", Seconds(minimum_ms=1), 1.0, "a follower waits at least..."
    )
    election_timeout_max_s: float = setting(
        "raft.election_timeout_max", Seconds(minimum_ms=1), 2.5, "...at most this for a leader"
    )
    # [auth]
    admin_token: str | None = setting(
        "auth.admin_token",
        Secret(ADMIN_TOKEN_ENV),
        None,
        "the admin bearer token; none: the node generates one",
        companions=("auth.admin_token_file",),
        always=True,
        is_secret=True,
    )
    # [cluster]
    partitions: int = setting(
        "cluster.partitions",
        _partitions,
        256,
        'fixed when the cluster is created; a range ("0-511"): this cell\'s share',
    )
    # The range form of cluster.partitions (first, last), read by the loader; None: this
    # cluster owns every partition (no [cells]).
    partition_range: tuple[int, int] | None = None
    cells: CellsSettings = section(CellsSettings)
    delivery: DeliverySettings = section(DeliverySettings)
    dispatch: DispatchSettings = section(DispatchSettings)
    # [encryption]
    payload_keys_file: Path | None = setting(
        "encryption.payload_keys_file", _path, None, "keys that seal payloads at rest"
    )
    # No payload_keys_file: a single node generates one into data_dir/payload.keys (node.py).
    generate_payload_key: bool = setting(
        "encryption.generate_payload_key", _flag, False, "a single node makes its own key"
    )
    # [log]
    log_format: str = setting("log.format", Choice(LOG_FORMATS), "text", "text or JSON lines")
    # [metrics]
    metrics_listen: str | None = setting(
        "metrics.listen", _listen, None, "serve /metrics on this address alone"
    )
    metrics_token: str | None = setting(
        "metrics.token",
        Secret(METRICS_TOKEN_ENV),
        None,
        "a bearer token for scraping only",
        companions=("metrics.token_file",),
        always=True,
        is_secret=True,
    )
    # [retention]: the defaults are Retention's own (retention.py)
    retention: Retention = section_of(
        Retention,
        "retention",
        Milliseconds(minimum_ms=MIN_RETENTION_MS),
        "how long finished {key} are kept",
    )
    # [storage]
    min_free: MinFree = setting(
        "storage.min_free",
        _min_free,
        MinFree(bytes=512 * 1024**2),
        "free space kept in data_dir: a size or a percentage",
    )

    def __post_init__(self) -> None:
        _check_cluster_shape(self)
        _check_cells(self)

    @property
    def has_cells(self) -> bool:
        """True when this node's cluster is one cell of several (a range and [cells] etcd)."""
        return self.partition_range is not None

    @property
    def is_single_node(self) -> bool:
        """True when the node has no peers: it forms a cluster of one."""
        return not self.raft_peers

    @property
    def api_host(self) -> str:
        """The host of `api_listen` (IPv6 without brackets): what the API binds."""
        return parse_listen(self.api_listen, field="api.listen")[0]

    @property
    def api_port(self) -> int:
        """The port of `api_listen`."""
        return parse_listen(self.api_listen, field="api.listen")[1]

    @property
    def is_tls(self) -> bool:
        """True when the API serves HTTPS only."""
        return self.tls_cert is not None

    @property
    def api_url(self) -> str:
        """The API's base URL as this node registers it: "https://host:port" with TLS."""
        return f"{'https' if self.is_tls else 'http'}://{self.api_listen}"


def _settings(fields_of: object) -> Iterator[Setting]:
    for f in dataclasses.fields(cast(Any, fields_of)):
        about = f.metadata.get(_ABOUT)
        if isinstance(about, Setting):
            yield about
        elif isinstance(about, Section):
            yield from (inner for _, inner in about.settings)


SETTINGS: tuple[Setting, ...] = tuple(_settings(NodeConfig))
KEYS = tuple(key for about in SETTINGS for key in about.keys)
SCHEMA: Mapping[str, tuple[str, ...]] = {
    name: tuple(key.partition(".")[2] for key in KEYS if key.partition(".")[0] == name)
    for name in dict.fromkeys(about.section for about in SETTINGS)
}


def _check_cluster_shape(cfg: NodeConfig) -> None:
    """Hold the invariants between fields, however the config was built."""
    _check_tls_pair(cfg)
    if cfg.election_timeout_max_s <= cfg.election_timeout_min_s:
        raise ConfigError(
            f"raft.election_timeout_max must be greater than raft.election_timeout_min, "
            f"got {cfg.election_timeout_max_s:g}s <= {cfg.election_timeout_min_s:g}s"
        )
    if cfg.raft_listen in cfg.raft_peers:
        raise ConfigError(
            f"raft.peers must list only the OTHER nodes, but it contains raft.listen "
            f"{cfg.raft_listen!r}"
        )
    duplicates = sorted({peer for peer in cfg.raft_peers if cfg.raft_peers.count(peer) > 1})
    if duplicates:
        raise ConfigError(f"raft.peers lists {duplicates[0]!r} more than once")
    if cfg.api_listen == cfg.raft_listen:
        raise ConfigError(f"api.listen and raft.listen must differ, both are {cfg.raft_listen!r}")
    _check_metrics_listen(cfg)
    if cfg.raft_peers and cfg.raft_secret is None:
        raise ConfigError(
            f"raft.peers lists {len(cfg.raft_peers)} peer(s) but there is no raft.secret, "
            f"raft.secret_file or {RAFT_SECRET_ENV}: a multi-node node refuses to start "
            f"without one"
        )
    _check_payload_key(cfg)


def _check_cells(cfg: NodeConfig) -> None:
    """A range needs [cells] etcd and cell; [cells] etcd or cell need a range."""
    cells = cfg.cells
    if cfg.partition_range is None:
        if cells.etcd or cells.cell is not None:
            given = "cells.etcd" if cells.etcd else "cells.cell"
            raise ConfigError(
                f"{given} is set but cluster.partitions is a count, not a range: a cell "
                f'serves a range such as cluster.partitions = "0-511"'
            )
        return
    first, last = cfg.partition_range
    if not cells.etcd:
        raise ConfigError(
            f'cluster.partitions is a range ("{first}-{last}") but cells.etcd is not set: a '
            "cell reads the directory of cells from etcd (or give a count for one cluster)"
        )
    if cells.cell is None:
        raise ConfigError("cells.etcd is set but cells.cell is not: name this node's cell")
    _check_etcd_tls(cells)
    if not first <= last < cfg.partitions or cfg.partitions != cells.partitions:
        raise ConfigError(
            f'cluster.partitions "{first}-{last}" must lie in 0..{cells.partitions - 1} '
            f"(cells.partitions = {cells.partitions}), first <= last"
        )


def _check_etcd_tls(cells: CellsSettings) -> None:
    """cells.etcd_cert and etcd_key: both or neither; any of the TLS files: https:// only."""
    if (cells.etcd_cert is None) != (cells.etcd_key is None):
        given, missing = (
            ("cells.etcd_cert", "cells.etcd_key")
            if cells.etcd_key is None
            else ("cells.etcd_key", "cells.etcd_cert")
        )
        raise ConfigError(f"{given} is set but {missing} is not: a client certificate needs both")
    plain = [url for url in cells.etcd if not url.startswith("https://")]
    if cells.has_etcd_tls and plain:
        given = "cells.etcd_cacert" if cells.etcd_cacert is not None else "cells.etcd_cert"
        raise ConfigError(
            f"{given} is set but cells.etcd holds {plain[0]!r}: TLS to etcd needs https:// URLs"
        )


def _check_tls_pair(cfg: NodeConfig) -> None:
    """api.tls_cert and api.tls_key: both (HTTPS) or neither (HTTP)."""
    if (cfg.tls_cert is None) == (cfg.tls_key is None):
        return
    given, missing, path = (
        ("api.tls_cert", "api.tls_key", cfg.tls_cert)
        if cfg.tls_key is None
        else ("api.tls_key", "api.tls_cert", cfg.tls_key)
    )
    raise ConfigError(
        f"{given} {str(path)!r} is set but {missing} is not: give both for HTTPS, "
        f"or neither for plain HTTP"
    )


def _check_payload_key(cfg: NodeConfig) -> None:
    if not cfg.generate_payload_key:
        return
    if cfg.payload_keys_file is not None:
        raise ConfigError(
            "encryption.generate_payload_key and encryption.payload_keys_file are both set: "
            "set one (a node that already generated its key: payload_keys_file = "
            "<data_dir>/payload.keys)"
        )
    if cfg.raft_peers:
        raise ConfigError(
            "encryption.generate_payload_key is for a single node (each node would make its own "
            "key and could not open its peers' payloads): give every node a copy of one key "
            "file with encryption.payload_keys_file (a node that generated its key has it in "
            "<data_dir>/payload.keys)"
        )


def _check_metrics_listen(cfg: NodeConfig) -> None:
    if cfg.metrics_listen is None:
        return
    if cfg.metrics_listen in (cfg.api_listen, cfg.raft_listen):
        raise ConfigError(
            f"metrics.listen must differ from api.listen and raft.listen, got "
            f"{cfg.metrics_listen!r}"
        )
    host = cfg.metrics_listen.rpartition(":")[0].strip("[]")
    if not _is_loopback(host) and cfg.metrics_token is None:
        raise ConfigError(
            f"metrics.listen {cfg.metrics_listen!r} is not a loopback address: give "
            f"metrics.token or metrics.token_file, or listen on 127.0.0.1"
        )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- loading -------------------------------------------------------------------------------------


def load_config(path: Path | str, env: Mapping[str, str] | None = None) -> NodeConfig:
    """Read, check and resolve the TOML file at `path`; `env` defaults to `os.environ`."""
    path = Path(path)
    raw = _read_toml(path)
    try:
        return _build(path, _check_layout(raw), os.environ if env is None else env)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: config file is not UTF-8 text ({exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _check_layout(raw: Mapping[str, Any]) -> Mapping[str, Mapping[str, object]]:
    """Refuse unknown sections and keys, with a hint at the closest known one."""
    for name, table in raw.items():
        if name not in SCHEMA:
            if isinstance(table, dict):
                raise ConfigError(f"unknown section [{name}]{_hint(name, SCHEMA)}")
            raise ConfigError(f"unknown key {name!r} outside any section{_section_hint(name)}")
        if not isinstance(table, dict):
            raise ConfigError(f"{name} must be a section ([{name}]), got {table!r}")
        for key in table:
            if key not in SCHEMA[name]:
                dotted = f"{name}.{key}"
                raise ConfigError(f"unknown key {dotted!r}{_hint(dotted, KEYS)}")
    return raw


def _hint(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _section_hint(key: str) -> str:
    """Hint at the section a top-level key belongs in: 'peers' -> 'raft.peers'."""
    by_key = {dotted.partition(".")[2]: dotted for dotted in reversed(KEYS)}
    close = difflib.get_close_matches(key, list(by_key), n=1)
    return f" (did you mean {by_key[close[0]]!r}?)" if close else ""


def _build(
    path: Path, doc: Mapping[str, Mapping[str, object]], env: Mapping[str, str]
) -> NodeConfig:
    """Every setting field the file gives (or whose parser runs regardless) parsed; the rest
    keep their declared defaults."""
    source = Source(doc, path.parent, env)
    values = _read(NodeConfig, source)
    cells_given = sorted(doc.get("cells", {}))
    values["partition_range"] = partition_range(source.value("cluster.partitions"))
    if cells_given and values["partition_range"] is None:
        raise ConfigError(
            f"cells.{cells_given[0]} is set but cluster.partitions is a count, not a range: "
            f'a cell serves a range such as cluster.partitions = "0-511"'
        )
    return NodeConfig(path=path.absolute(), **values)


def _read(kind: object, source: Source) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cast(Any, kind)):
        about = f.metadata.get(_ABOUT)
        if isinstance(about, Section):
            values[f.name] = about.build(**_read_section(about, source))
        elif isinstance(about, Setting):
            given = source.value(about.key)
            if given is not None or about.always:
                values[f.name] = about.parse(given, about.key, source)
    return values


def _read_section(section: Section, source: Source) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, about in section.settings:
        given = source.value(about.key)
        if given is not None:
            values[name] = about.parse(given, about.key, source)
    return values


# -- helpers -------------------------------------------------------------------------------------


def _typed(value: object, kind: type[_T], *, field: str, what: str) -> _T:
    # bool subclasses int: `partitions = true` must not read as 1.
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        shown = str(value).lower() if isinstance(value, bool) else repr(value)  # as TOML has it
        raise ConfigError(f"{field} must be {what}, got {shown}")
    return value


def _resolve(base: Path, name: str) -> Path:
    """Resolve a path from the file against the config file's folder."""
    return (base / Path(name).expanduser()).resolve()


def parse_listen(value: str, *, field: str) -> tuple[str, int]:
    """Split "host:port" or "[v6]:port" into (host, port); the port must be 1..65535."""
    match = _LISTEN.fullmatch(value)
    if match is None:
        v6_hint = ' (write IPv6 as "[::1]:8701")' if value.count(":") > 1 else ""
        raise ConfigError(f'{field} must be "host:port", got {value!r}{v6_hint}')
    port = int(match["port"])
    if not 1 <= port <= 65_535:
        raise ConfigError(f"{field} port must be 1..65535, got {value!r}")
    if match["v6"] is not None:
        try:
            return str(ipaddress.IPv6Address(match["v6"])), port
        except ValueError:
            raise ConfigError(f"{field} has no IPv6 address inside [], got {value!r}") from None
    if not _HOSTNAME.fullmatch(match["host"]):
        raise ConfigError(f"{field} host must be a name or an IPv4 address, got {value!r}")
    return match["host"].lower(), port


def join_listen(host: str, port: int) -> str:
    """The canonical "host:port" text of an address, with IPv6 hosts in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _strings(value: object, key: str) -> list[str]:
    items = _typed(value, list, field=key, what="a list of strings")
    for item in items:
        _typed(item, str, field=key, what="a list of strings")
    return items


def _size(value: object, field: str, example: str) -> int:
    match = _SIZE.fullmatch(value.strip()) if isinstance(value, str) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if match:
        return int(match[1]) * _SIZE_UNITS[match[2] or "B"]
    raise ConfigError(
        f"{field} must be a size like '{example}' ({', '.join(_SIZE_UNITS)}) or a number of "
        f"bytes, got {value!r}"
    )


def _read_secret_file(base: Path, name: str, *, field: str) -> str:
    path = _resolve(base, name)
    where = f"{field} {name!r} ({path})"
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ConfigError(f"{where} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where} is not UTF-8 text") from None
    if not text:
        raise ConfigError(f"{where} is empty")
    return text


def _long_enough(secret: str, *, source: str) -> str:
    # The message gives the length, never the secret itself.
    if len(secret) < MIN_SECRET_CHARS:
        raise ConfigError(
            f"{source} must be at least {MIN_SECRET_CHARS} characters, got {len(secret)}"
        )
    return secret
