"""A node's TOML configuration: read, check and resolve it into one frozen `NodeConfig`.

Every problem is a `ConfigError` naming the file, the `section.key` and the bad value (never a
secret). Reads files and the environment only; starts nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from schedd.errors import ConfigError, InvalidRequest
from schedd.retention import DEFAULTS_MS, KINDS, MIN_RETENTION_MS, Retention
from schedd.storage import MinFree
from schedd.timeformat import parse_duration

_T = TypeVar("_T")

SCHEMA: Mapping[str, tuple[str, ...]] = {
    "node": ("id", "data_dir", "log_level"),
    "api": (
        "listen",
        "request_timeout",
        "header_timeout",
        "body_timeout",
        "max_body_reads",
        "long_polls_per_tenant",
        "tls_cert",
        "tls_key",
        "tls_ca",
    ),
    "raft": (
        "listen",
        "peers",
        "secret",
        "secret_file",
        "compaction_min_entries",
        "compaction_min_time",
        "election_timeout_min",
        "election_timeout_max",
    ),
    "auth": ("admin_token", "admin_token_file"),
    "cluster": ("partitions",),
    "delivery": (
        "allow_cidrs",
        "payload_limit",
        "concurrency",
        "tenant_concurrency",
        "secret_overlap",
    ),
    "dispatch": ("lease_ttl", "misfire_threshold", "max_clock_offset"),
    "encryption": ("payload_keys_file", "generate_payload_key"),
    "log": ("format",),
    "metrics": ("listen", "token", "token_file"),
    "retention": KINDS,
    "storage": ("min_free",),
}
KEYS = tuple(f"{section}.{key}" for section, keys in SCHEMA.items() for key in keys)
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
RAFT_SECRET_ENV = "SCHEDD_RAFT_SECRET"
ADMIN_TOKEN_ENV = "SCHEDD_ADMIN_TOKEN"
METRICS_TOKEN_ENV = "SCHEDD_METRICS_TOKEN"
MIN_SECRET_CHARS = 16
MIN_PAYLOAD_BYTES = 1024
MAX_PAYLOAD_BYTES = 512 * 1024  # sealed and in its job, it must fit one 1 MiB Raft command
MAX_PARTITIONS = 65_536
DEFAULT_API_LISTEN = "127.0.0.1:8701"
DEFAULT_RAFT_LISTEN = "127.0.0.1:9701"
DEFAULT_MIN_FREE = MinFree(bytes=512 * 1024**2)
DEFAULT_RETENTION = Retention()

_NODE_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
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


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeConfig:
    """One node's settings, checked; durations in seconds, sizes in bytes, paths absolute."""

    path: Path
    node_id: str
    data_dir: Path
    log_level: str = "info"
    log_format: str = "text"
    api_host: str = "127.0.0.1"
    api_port: int = 8701
    request_timeout_s: float = 5.0
    tls_cert: Path | None = None  # with tls_key: HTTPS only (schedd/tls.py)
    tls_key: Path | None = None
    tls_ca: Path | None = None  # verifies the peers' API certificates
    raft_listen: str = DEFAULT_RAFT_LISTEN
    raft_peers: tuple[str, ...] = ()
    raft_secret: str | None = dataclasses.field(default=None, repr=False)
    compaction_min_entries: int = 10_000
    compaction_min_time_s: float = 300.0
    election_timeout_min_s: float = 1.0
    election_timeout_max_s: float = 2.5
    admin_token: str | None = dataclasses.field(default=None, repr=False)
    partitions: int = 256
    allow_cidrs: tuple[str, ...] = ()
    payload_limit_bytes: int = 65_536
    delivery_concurrency: int = 512
    tenant_concurrency: int = 64
    secret_overlap_ms: int = 86_400_000
    payload_keys_file: Path | None = None
    # No payload_keys_file: a single node generates one into data_dir/payload.keys (node.py).
    generate_payload_key: bool = False
    retention: Retention = DEFAULT_RETENTION
    min_free: MinFree = DEFAULT_MIN_FREE
    lease_ttl_ms: int = 5_000
    misfire_threshold_ms: int = 60_000
    max_clock_offset_ms: int = 500
    api_header_timeout_s: float = 15.0
    api_body_timeout_s: float = 30.0
    api_max_body_reads: int = 64
    api_long_polls_per_tenant: int = 32
    metrics_listen: str | None = None  # "host:port" of a /metrics-only listener
    metrics_token: str | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        _check_cluster_shape(self)

    @property
    def is_single_node(self) -> bool:
        """True when the node has no peers: it forms a cluster of one."""
        return not self.raft_peers

    @property
    def api_listen(self) -> str:
        """The API address as "host:port" ("[::1]:8701" for IPv6)."""
        return join_listen(self.api_host, self.api_port)

    @property
    def is_tls(self) -> bool:
        """True when the API serves HTTPS only."""
        return self.tls_cert is not None

    @property
    def api_url(self) -> str:
        """The API's base URL as this node registers it: "https://host:port" with TLS."""
        return f"{'https' if self.is_tls else 'http'}://{self.api_listen}"


def _check_cluster_shape(cfg: NodeConfig) -> None:
    """Hold the invariants between fields, however the config was built."""
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
    base = path.parent
    api_host, api_port = parse_listen(
        _text(doc, "api.listen", DEFAULT_API_LISTEN), field="api.listen"
    )
    raft_listen = join_listen(
        *parse_listen(_text(doc, "raft.listen", DEFAULT_RAFT_LISTEN), field="raft.listen")
    )
    tls_cert, tls_key = _tls_pair(base, doc)
    return NodeConfig(
        path=path.absolute(),
        node_id=_node_id(doc),
        data_dir=_resolve(base, _required_text(doc, "node.data_dir")),
        log_level=_log_level(doc),
        log_format=_choice(doc, "log.format", "text", LOG_FORMATS),
        api_host=api_host,
        api_port=api_port,
        request_timeout_s=_seconds(doc, "api.request_timeout", 5_000, minimum_ms=1),
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_ca=_optional_path(base, doc, "api.tls_ca"),
        raft_listen=raft_listen,
        raft_peers=_peers(doc),
        raft_secret=_secret(doc, "raft.secret", base, env, RAFT_SECRET_ENV),
        compaction_min_entries=_integer(doc, "raft.compaction_min_entries", 10_000, 1, 10**9),
        compaction_min_time_s=_seconds(doc, "raft.compaction_min_time", 300_000, minimum_ms=1_000),
        election_timeout_min_s=_seconds(doc, "raft.election_timeout_min", 1_000, minimum_ms=1),
        election_timeout_max_s=_seconds(doc, "raft.election_timeout_max", 2_500, minimum_ms=1),
        admin_token=_secret(doc, "auth.admin_token", base, env, ADMIN_TOKEN_ENV),
        partitions=_integer(doc, "cluster.partitions", 256, 1, MAX_PARTITIONS),
        allow_cidrs=_cidrs(doc),
        payload_limit_bytes=_payload_limit(doc),
        delivery_concurrency=_integer(doc, "delivery.concurrency", 512, 1, 10_000),
        tenant_concurrency=_integer(doc, "delivery.tenant_concurrency", 64, 1, 10_000),
        secret_overlap_ms=_duration_ms(doc, "delivery.secret_overlap", 86_400_000, minimum_ms=0),
        payload_keys_file=_optional_path(base, doc, "encryption.payload_keys_file"),
        generate_payload_key=_flag(doc, "encryption.generate_payload_key"),
        retention=Retention(
            **{
                kind: _duration_ms(
                    doc, f"retention.{kind}", DEFAULTS_MS[kind], minimum_ms=MIN_RETENTION_MS
                )
                for kind in KINDS
            }
        ),
        min_free=_min_free(doc),
        lease_ttl_ms=_duration_ms(doc, "dispatch.lease_ttl", 5_000, minimum_ms=2_000),
        misfire_threshold_ms=_duration_ms(
            doc, "dispatch.misfire_threshold", 60_000, minimum_ms=1_000
        ),
        max_clock_offset_ms=_duration_ms(doc, "dispatch.max_clock_offset", 500, minimum_ms=50),
        api_header_timeout_s=_seconds(doc, "api.header_timeout", 15_000, minimum_ms=100),
        api_body_timeout_s=_seconds(doc, "api.body_timeout", 30_000, minimum_ms=100),
        api_max_body_reads=_integer(doc, "api.max_body_reads", 64, 1, 100_000),
        api_long_polls_per_tenant=_integer(doc, "api.long_polls_per_tenant", 32, 1, 100_000),
        metrics_listen=_metrics_listen(doc),
        metrics_token=_secret(doc, "metrics.token", base, env, METRICS_TOKEN_ENV),
    )


def _value(doc: Mapping[str, Mapping[str, object]], field: str) -> object | None:
    section, key = field.split(".")
    return doc.get(section, {}).get(key)  # TOML has no null: None means "not given"


def _typed(value: object, kind: type[_T], *, field: str, what: str) -> _T:
    # bool subclasses int: `partitions = true` must not read as 1.
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        shown = str(value).lower() if isinstance(value, bool) else repr(value)  # as TOML has it
        raise ConfigError(f"{field} must be {what}, got {shown}")
    return value


def _flag(doc: Mapping[str, Mapping[str, object]], field: str) -> bool:
    value = _value(doc, field)
    return False if value is None else _typed(value, bool, field=field, what="true or false")


def _optional_text(doc: Mapping[str, Mapping[str, object]], field: str) -> str | None:
    value = _value(doc, field)
    return None if value is None else _typed(value, str, field=field, what="a string")


def _text(doc: Mapping[str, Mapping[str, object]], field: str, default: str) -> str:
    text = _optional_text(doc, field)
    return default if text is None else text


def _required_text(doc: Mapping[str, Mapping[str, object]], field: str) -> str:
    value = _value(doc, field)
    if value is None:
        raise ConfigError(f"{field} is required")
    text = _typed(value, str, field=field, what="a string")
    if not text.strip():
        raise ConfigError(f"{field} must not be empty, got {text!r}")
    return text


def _integer(
    doc: Mapping[str, Mapping[str, object]], field: str, default: int, low: int, high: int
) -> int:
    value = _value(doc, field)
    if value is None:
        return default
    number = _typed(value, int, field=field, what="an integer")
    if not low <= number <= high:
        raise ConfigError(f"{field} must be {low}..{high}, got {number!r}")
    return number


def _node_id(doc: Mapping[str, Mapping[str, object]]) -> str:
    node_id = _required_text(doc, "node.id")
    if not _NODE_ID.fullmatch(node_id):
        raise ConfigError(f"node.id must be 1-64 of A-Z a-z 0-9 _ . -, got {node_id!r}")
    return node_id


def _choice(
    doc: Mapping[str, Mapping[str, object]], field: str, default: str, choices: tuple[str, ...]
) -> str:
    value = _text(doc, field, default)
    if value not in choices:
        raise ConfigError(f"{field} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _log_level(doc: Mapping[str, Mapping[str, object]]) -> str:
    level = _text(doc, "node.log_level", "info")
    if level not in LOG_LEVELS:
        raise ConfigError(f"node.log_level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    return level


def _optional_path(base: Path, doc: Mapping[str, Mapping[str, object]], field: str) -> Path | None:
    text = _optional_text(doc, field)
    return None if text is None else _resolve(base, text)


def _tls_pair(
    base: Path, doc: Mapping[str, Mapping[str, object]]
) -> tuple[Path, Path] | tuple[None, None]:
    """api.tls_cert and api.tls_key: both (HTTPS) or neither (HTTP)."""
    cert = _optional_path(base, doc, "api.tls_cert")
    key = _optional_path(base, doc, "api.tls_key")
    if cert is not None and key is not None:
        return cert, key
    if cert is None and key is None:
        return None, None
    given, missing, path = (
        ("api.tls_cert", "api.tls_key", cert)
        if key is None
        else ("api.tls_key", "api.tls_cert", key)
    )
    raise ConfigError(
        f"{given} {str(path)!r} is set but {missing} is not: give both for HTTPS, "
        f"or neither for plain HTTP"
    )


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


def _strings(doc: Mapping[str, Mapping[str, object]], field: str) -> list[str]:
    value = _value(doc, field)
    if value is None:
        return []
    items = _typed(value, list, field=field, what="a list of strings")
    for item in items:
        _typed(item, str, field=field, what="a list of strings")
    return items


def _peers(doc: Mapping[str, Mapping[str, object]]) -> tuple[str, ...]:
    return tuple(
        join_listen(*parse_listen(peer, field="raft.peers")) for peer in _strings(doc, "raft.peers")
    )


def _cidrs(doc: Mapping[str, Mapping[str, object]]) -> tuple[str, ...]:
    networks = []
    for cidr in _strings(doc, "delivery.allow_cidrs"):
        try:
            networks.append(str(ipaddress.ip_network(cidr, strict=False)))
        except ValueError:
            raise ConfigError(
                f"delivery.allow_cidrs must hold networks like '10.0.0.0/8', got {cidr!r}"
            ) from None
    return tuple(networks)


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


def _min_free(doc: Mapping[str, Mapping[str, object]]) -> MinFree:
    field = "storage.min_free"
    value = _value(doc, field)
    if value is None:
        return DEFAULT_MIN_FREE
    percent = _PERCENT.fullmatch(value.strip()) if isinstance(value, str) else None
    if percent:
        return MinFree(percent=float(percent[1]))
    return MinFree(bytes=_size(value, field, "1GiB' or '5%"))


def _payload_limit(doc: Mapping[str, Mapping[str, object]]) -> int:
    field = "delivery.payload_limit"
    value = _value(doc, field)
    if value is None:
        return 65_536
    size = _size(value, field, "64KiB")
    if not MIN_PAYLOAD_BYTES <= size <= MAX_PAYLOAD_BYTES:
        raise ConfigError(
            f"{field} must be 1KiB..512KiB (a job must fit one Raft command), got {value!r}"
        )
    return size


def _metrics_listen(doc: Mapping[str, Mapping[str, object]]) -> str | None:
    text = _optional_text(doc, "metrics.listen")
    return None if text is None else join_listen(*parse_listen(text, field="metrics.listen"))


def _duration_ms(
    doc: Mapping[str, Mapping[str, object]], field: str, default_ms: int, *, minimum_ms: int
) -> int:
    value = _value(doc, field)
    if value is None:
        return default_ms
    try:
        return parse_duration(value, field=field, minimum_ms=minimum_ms)
    except InvalidRequest as exc:
        raise ConfigError(f"{field} {exc.reason}") from None


def _seconds(
    doc: Mapping[str, Mapping[str, object]], field: str, default_ms: int, *, minimum_ms: int
) -> float:
    return _duration_ms(doc, field, default_ms, minimum_ms=minimum_ms) / 1_000


def _secret(
    doc: Mapping[str, Mapping[str, object]],
    field: str,
    base: Path,
    env: Mapping[str, str],
    env_name: str,
) -> str | None:
    """The secret from `env_name`, else `field` or the file `field`_file, stripped; else None."""
    file_field = f"{field}_file"
    inline = _optional_text(doc, field)
    file_name = _optional_text(doc, file_field)
    if inline is not None and file_name is not None:
        raise ConfigError(f"give {field} or {file_field}, not both")
    from_env = env.get(env_name, "").strip()  # an empty variable counts as unset
    if from_env:
        return _long_enough(from_env, source=env_name)
    if file_name is not None:
        secret = _read_secret_file(base, file_name, field=file_field)
        return _long_enough(secret, source=f"{file_field} {file_name!r}")
    return None if inline is None else _long_enough(inline.strip(), source=field)


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
