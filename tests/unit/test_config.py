"""`schedd.config`: loading, every validation rule, env overrides and the shipped config files."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from schedd.config import ApiLimits, NodeConfig, load_config, parse_listen
from schedd.errors import ConfigError
from schedd.retention import DAY_MS, Retention
from schedd.storage import MinFree

REPO = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO / "config"
BASE = '[node]\nid = "n1"\ndata_dir = "data"\n'
SECRET = "s3cret-s3cret-s3cret"
TOKEN = "t0ken-t0ken-t0ken-t0ken"
CLUSTER_ENV = {"SCHEDD_RAFT_SECRET": SECRET, "SCHEDD_ADMIN_TOKEN": TOKEN}


def write(tmp_path: Path, body: str, name: str = "node.toml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


def load(tmp_path: Path, extra: str = "", env: dict[str, str] | None = None) -> NodeConfig:
    """Load BASE + `extra`; lines of `extra` before any [section] belong to [node]."""
    return load_config(write(tmp_path, BASE + extra), env={} if env is None else env)


def error(tmp_path: Path, extra: str = "", env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, extra, env)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'node.toml'}: "), message
    return message.split(": ", 1)[1]


# -- defaults and paths ------------------------------------------------------------------------


def test_minimal_config_gets_the_documented_defaults(tmp_path: Path) -> None:
    cfg = load(tmp_path)
    assert cfg.path == tmp_path / "node.toml"
    assert cfg.node_id == "n1"
    assert cfg.data_dir == (tmp_path / "data").resolve()
    assert cfg.log_level == "info"
    assert (cfg.api_host, cfg.api_port, cfg.api_listen) == ("127.0.0.1", 8701, "127.0.0.1:8701")
    assert cfg.request_timeout_s == 5.0
    assert cfg.raft_listen == "127.0.0.1:9701"
    assert cfg.raft_peers == ()
    assert cfg.raft_secret is None
    assert cfg.admin_token is None
    assert cfg.compaction_min_entries == 10_000
    assert cfg.compaction_min_time_s == 300.0
    assert (cfg.election_timeout_min_s, cfg.election_timeout_max_s) == (1.0, 2.5)
    assert cfg.partitions == 256
    assert cfg.delivery.allow_cidrs == ()
    assert cfg.delivery.payload_limit_bytes == 65_536
    assert cfg.retention == Retention(
        runs=7 * DAY_MS, audit=30 * DAY_MS, deadletters=14 * DAY_MS, messages=7 * DAY_MS
    )
    assert cfg.min_free == MinFree(bytes=512 * 1024**2)
    assert cfg.is_single_node


def test_every_key_is_read(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        'log_level = "debug"\n'
        '[api]\nlisten = "0.0.0.0:9000"\nrequest_timeout = "250ms"\nheader_timeout = "5s"\n'
        'body_timeout = "20s"\nmax_body_reads = 8\nlong_polls_per_tenant = 4\n'
        f'[metrics]\nlisten = "10.0.0.1:9464"\ntoken = "{TOKEN}x"\n'
        '[raft]\nlisten = "10.0.0.1:9100"\npeers = ["10.0.0.2:9100"]\n'
        f'secret = "{SECRET}"\ncompaction_min_entries = 500\ncompaction_min_time = "1m"\n'
        'election_timeout_min = "300ms"\nelection_timeout_max = "900ms"\n'
        f'[auth]\nadmin_token = "{TOKEN}"\n'
        "[cluster]\npartitions = 1024\n"
        '[delivery]\nallow_cidrs = ["127.0.0.0/8"]\npayload_limit = "512KiB"\n'
        'concurrency = 64\ntenant_concurrency = 4\nsecret_overlap = "1h"\n'
        '[encryption]\npayload_keys_file = "keys/payload.keys"\n'
        '[retention]\nruns = "30d"\naudit = "90d"\ndeadletters = "1d"\nmessages = "2h"\n'
        '[storage]\nmin_free = "5%"\n',
    )
    assert cfg.log_level == "debug"
    assert (cfg.api_host, cfg.api_port, cfg.request_timeout_s) == ("0.0.0.0", 9000, 0.25)
    assert (cfg.raft_listen, cfg.raft_peers) == ("10.0.0.1:9100", ("10.0.0.2:9100",))
    assert (cfg.raft_secret, cfg.admin_token) == (SECRET, TOKEN)
    assert (cfg.compaction_min_entries, cfg.compaction_min_time_s) == (500, 60.0)
    assert (cfg.election_timeout_min_s, cfg.election_timeout_max_s) == (0.3, 0.9)
    assert (cfg.partitions, cfg.delivery.allow_cidrs) == (1024, ("127.0.0.0/8",))
    assert cfg.delivery.payload_limit_bytes == 512 * 1024
    assert cfg.api_limits == ApiLimits(
        header_timeout_s=5.0, body_timeout_s=20.0, max_body_reads=8, long_polls_per_tenant=4
    )
    assert (cfg.metrics_listen, cfg.metrics_token) == ("10.0.0.1:9464", TOKEN + "x")
    assert (cfg.delivery.concurrency, cfg.delivery.tenant_concurrency) == (64, 4)
    assert cfg.delivery.secret_overlap_ms == 3_600_000
    assert cfg.payload_keys_file == (tmp_path / "keys" / "payload.keys").resolve()
    assert cfg.retention == Retention(
        runs=30 * DAY_MS, audit=90 * DAY_MS, deadletters=DAY_MS, messages=7_200_000
    )
    assert cfg.min_free == MinFree(percent=5.0)
    assert not cfg.is_single_node


def test_path_may_be_a_string(tmp_path: Path) -> None:
    path = write(tmp_path, BASE)
    assert load_config(str(path), env={}).path == path


def test_relative_data_dir_resolves_against_the_config_folder_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, '[node]\nid = "n1"\ndata_dir = "../var/n1"\n', "etc/node.toml")
    monkeypatch.chdir(tmp_path / "etc")
    cfg = load_config("node.toml", env={})
    assert cfg.data_dir == (tmp_path / "var" / "n1").resolve()
    assert cfg.path == path


def test_absolute_data_dir_is_kept(tmp_path: Path) -> None:
    elsewhere = (tmp_path / "elsewhere").resolve()
    cfg = load_config(write(tmp_path, f'[node]\nid = "n1"\ndata_dir = "{elsewhere}"\n'), env={})
    assert cfg.data_dir == elsewhere


# -- the file itself ---------------------------------------------------------------------------


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml: config file does not exist"):
        load_config(tmp_path / "nope.toml", env={})


def test_a_directory_is_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(str(tmp_path))}: cannot read config file"):
        load_config(tmp_path, env={})


def test_invalid_toml_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "partitions = = 3\n")
    with pytest.raises(ConfigError, match=r"node\.toml: invalid TOML: .*line 4") as info:
        load_config(path, env={})
    assert str(info.value).startswith(str(path))


def test_file_that_is_not_utf8_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "node.toml"
    path.write_bytes(b'[node]\nid = "\xff"\n')
    with pytest.raises(ConfigError, match=r"node\.toml: config file is not UTF-8"):
        load_config(path, env={})


def test_errors_name_the_path_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "[raft]\npeer = []\n", "config/n1.toml")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_config("config/n1.toml", env={})
    assert str(info.value) == "config/n1.toml: unknown key 'raft.peer' (did you mean 'raft.peers'?)"


# -- unknown sections and keys -----------------------------------------------------------------


def test_unknown_key_is_an_error_with_a_hint(tmp_path: Path) -> None:
    assert error(tmp_path, "[raft]\npeer = []\n") == (
        "unknown key 'raft.peer' (did you mean 'raft.peers'?)"
    )


def test_key_in_the_wrong_section_hints_at_the_right_one(tmp_path: Path) -> None:
    message = error(tmp_path, f'[raft]\nadmin_token = "{TOKEN}"\n')
    assert message == "unknown key 'raft.admin_token' (did you mean 'auth.admin_token'?)"


def test_unknown_key_without_a_close_match_has_no_hint(tmp_path: Path) -> None:
    assert error(tmp_path, "[api]\nzzz = 1\n") == "unknown key 'api.zzz'"


def test_unknown_section_is_an_error_with_a_hint(tmp_path: Path) -> None:
    assert error(tmp_path, "[rafts]\n") == "unknown section [rafts] (did you mean 'raft'?)"


def test_nested_table_is_an_unknown_key(tmp_path: Path) -> None:
    assert error(tmp_path, "[raft.tls]\ncert = 'x'\n").startswith("unknown key 'raft.tls'")


def test_key_outside_any_section_hints_at_its_section(tmp_path: Path) -> None:
    path = write(tmp_path, "peers = []\n" + BASE)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert str(info.value).endswith(
        "unknown key 'peers' outside any section (did you mean 'raft.peers'?)"
    )


def test_known_section_that_is_not_a_table_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, 'api = "127.0.0.1:8701"\n' + BASE)
    with pytest.raises(ConfigError, match=r"api must be a section \(\[api\]\), got '127"):
        load_config(path, env={})


# -- [node] ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[node]\ndata_dir = "d"\n', "node.id is required"),
        ('[node]\nid = "n1"\n', "node.data_dir is required"),
        ("[api]\n", "node.id is required"),
        ('[node]\nid = "n1"\ndata_dir = " "\n', "node.data_dir must not be empty, got ' '"),
        ('[node]\nid = "n1"\ndata_dir = 5\n', "node.data_dir must be a string, got 5"),
    ],
)
def test_node_id_and_data_dir_are_required(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, body), env={})
    assert str(info.value).endswith(message)


@pytest.mark.parametrize("node_id", ["n1", "node-1.eu_west", "A" * 64, "0"])
def test_valid_node_ids(tmp_path: Path, node_id: str) -> None:
    body = f'[node]\nid = "{node_id}"\ndata_dir = "d"\n'
    assert load_config(write(tmp_path, body), env={}).node_id == node_id


@pytest.mark.parametrize("node_id", ["", "a b", "A" * 65, "nöde", "n/1", "n:1"])
def test_invalid_node_ids(tmp_path: Path, node_id: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, f'[node]\nid = "{node_id}"\ndata_dir = "d"\n'), env={})
    assert "node.id must" in str(info.value)
    assert repr(node_id) in str(info.value)


@pytest.mark.parametrize("level", ["debug", "info", "warning", "error"])
def test_log_levels(tmp_path: Path, level: str) -> None:
    assert load(tmp_path, f'log_level = "{level}"\n').log_level == level


def test_unknown_log_level_is_an_error(tmp_path: Path) -> None:
    assert error(tmp_path, 'log_level = "verbose"\n') == (
        "node.log_level must be one of debug, info, warning, error, got 'verbose'"
    )


# -- types -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("[cluster]\npartitions = true\n", "cluster.partitions must be an integer, got true"),
        ('[cluster]\npartitions = "256"\n', "cluster.partitions must be an integer, got '256'"),
        ("[cluster]\npartitions = 2.0\n", "cluster.partitions must be an integer, got 2.0"),
        (
            "[raft]\ncompaction_min_entries = false\n",
            "raft.compaction_min_entries must be an integer, got false",
        ),
        ("[api]\nlisten = 8701\n", "api.listen must be a string, got 8701"),
        ("log_level = 1\n", "node.log_level must be a string, got 1"),
        (
            '[raft]\npeers = "127.0.0.1:9702"\n',
            "raft.peers must be a list of strings, got '127.0.0.1:9702'",
        ),
        ("[raft]\npeers = [9702]\n", "raft.peers must be a list of strings, got 9702"),
        (
            '[delivery]\nallow_cidrs = "10.0.0.0/8"\n',
            "delivery.allow_cidrs must be a list of strings, got '10.0.0.0/8'",
        ),
        ("[raft]\nsecret = 1234567890123456789\n", "raft.secret must be a string, got "),
        ("[auth]\nadmin_token_file = true\n", "auth.admin_token_file must be a string, got true"),
        ("[retention]\nruns = true\n", "retention.runs must be a duration like"),
        ("[delivery]\npayload_limit = true\n", "delivery.payload_limit must be a size like"),
    ],
)
def test_wrong_types_are_errors(tmp_path: Path, extra: str, message: str) -> None:
    assert error(tmp_path, extra).startswith(message)


# -- listen addresses --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:8701", ("127.0.0.1", 8701)),
        ("0.0.0.0:1", ("0.0.0.0", 1)),
        ("localhost:65535", ("localhost", 65535)),
        ("Node-1.Example.com:80", ("node-1.example.com", 80)),
        ("[::1]:8701", ("::1", 8701)),
        ("[2001:DB8:0:0::1]:9701", ("2001:db8::1", 9701)),
    ],
)
def test_parse_listen_accepts_host_port(value: str, expected: tuple[str, int]) -> None:
    assert parse_listen(value, field="api.listen") == expected


@pytest.mark.parametrize(
    "value",
    ["8701", ":8701", "127.0.0.1", "127.0.0.1:", "host:http", "[h]:", "h:-1", "h:\u0668\u0660"],
)
def test_parse_listen_needs_host_and_port(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_listen(value, field="api.listen")
    assert str(info.value) == f'api.listen must be "host:port", got {value!r}'


@pytest.mark.parametrize("value", ["::1:8701", "[::1]", "[::1:80", "1.2.3.4:5:6"])
def test_parse_listen_points_colons_at_ipv6_brackets(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_listen(value, field="raft.listen")
    assert str(info.value) == (
        f'raft.listen must be "host:port", got {value!r} (write IPv6 as "[::1]:8701")'
    )


@pytest.mark.parametrize("value", ["h:0", "h:65536", "h:99999"])
def test_parse_listen_port_range(value: str) -> None:
    with pytest.raises(ConfigError, match=r"api\.listen port must be 1\.\.65535"):
        parse_listen(value, field="api.listen")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[zz]:80", "has no IPv6 address inside []"),
        ("[1.2.3.4]:80", "has no IPv6 address inside []"),
        ("a b:80", "host must be a name or an IPv4 address"),
    ],
)
def test_parse_listen_bad_hosts(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_listen(value, field="api.listen")
    assert str(info.value) == f"api.listen {message}, got {value!r}"


def test_bad_api_listen_in_a_file_names_file_key_and_value(tmp_path: Path) -> None:
    assert error(tmp_path, '[api]\nlisten = "8701"\n') == (
        "api.listen must be \"host:port\", got '8701'"
    )


def test_ipv6_api_listen(tmp_path: Path) -> None:
    cfg = load(tmp_path, '[api]\nlisten = "[::1]:8701"\n')
    assert (cfg.api_host, cfg.api_port, cfg.api_listen) == ("::1", 8701, "[::1]:8701")


def test_api_and_raft_must_not_share_an_address(tmp_path: Path) -> None:
    message = error(tmp_path, '[api]\nlisten = "127.0.0.1:9701"\n')
    assert message == "api.listen and raft.listen must differ, both are '127.0.0.1:9701'"


# -- raft peers --------------------------------------------------------------------------------


def peers_config(peers: str, listen: str = "127.0.0.1:9701") -> str:
    return f'[raft]\nlisten = "{listen}"\npeers = {peers}\nsecret = "{SECRET}"\n'


def test_peers_are_kept_in_canonical_form(tmp_path: Path) -> None:
    cfg = load(tmp_path, peers_config('["LOCALHOST:9702", "[0:0::1]:9703"]'))
    assert cfg.raft_peers == ("localhost:9702", "[::1]:9703")


def test_peers_must_not_contain_raft_listen(tmp_path: Path) -> None:
    message = error(tmp_path, peers_config('["127.0.0.1:9701", "127.0.0.1:9702"]'))
    assert message == (
        "raft.peers must list only the OTHER nodes, but it contains raft.listen '127.0.0.1:9701'"
    )


def test_peers_must_not_contain_the_default_raft_listen(tmp_path: Path) -> None:
    extra = f'[raft]\npeers = ["127.0.0.1:9701"]\nsecret = "{SECRET}"\n'
    assert "contains raft.listen '127.0.0.1:9701'" in error(tmp_path, extra)


@pytest.mark.parametrize(
    "peers", ['["h:9702", "h:9702"]', '["h:9702", "H:9702"]', '["[::1]:9702", "[0::1]:9702"]']
)
def test_duplicate_peers_are_an_error(tmp_path: Path, peers: str) -> None:
    assert "more than once" in error(tmp_path, peers_config(peers))


def test_bad_peer_names_raft_peers(tmp_path: Path) -> None:
    message = error(tmp_path, peers_config('["127.0.0.1:9702", "9703"]'))
    assert message == "raft.peers must be \"host:port\", got '9703'"


# -- secrets and tokens ------------------------------------------------------------------------


def test_multi_node_without_a_secret_refuses_to_start(tmp_path: Path) -> None:
    message = error(tmp_path, '[raft]\npeers = ["127.0.0.1:9702"]\n')
    assert message.startswith("raft.peers lists 1 peer(s) but there is no raft.secret")
    assert "refuses to start" in message


def test_single_node_needs_no_secret(tmp_path: Path) -> None:
    assert load(tmp_path, "[raft]\npeers = []\n").raft_secret is None


def test_secret_file_is_read_stripped_and_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "cluster.secret").write_text(f"\n  {SECRET}  \n")
    extra = '[raft]\npeers = ["h:9702"]\nsecret_file = "var/cluster.secret"\n'
    assert load(tmp_path, extra).raft_secret == SECRET


def test_admin_token_file_is_read_stripped(tmp_path: Path) -> None:
    (tmp_path / "admin.token").write_text(f"{TOKEN}\n")
    assert load(tmp_path, '[auth]\nadmin_token_file = "admin.token"\n').admin_token == TOKEN


@pytest.mark.parametrize(
    ("section", "key"), [("raft", "secret"), ("auth", "admin_token")], ids=["raft", "auth"]
)
def test_value_and_file_together_are_an_error(tmp_path: Path, section: str, key: str) -> None:
    (tmp_path / "f").write_text(SECRET)
    extra = f'[{section}]\n{key} = "{SECRET}"\n{key}_file = "f"\n'
    assert error(tmp_path, extra) == f"give {section}.{key} or {section}.{key}_file, not both"


@pytest.mark.parametrize(
    ("section", "key"), [("raft", "secret_file"), ("auth", "admin_token_file")]
)
def test_missing_secret_file_is_an_error(tmp_path: Path, section: str, key: str) -> None:
    message = error(tmp_path, f'[{section}]\n{key} = "nope/x.secret"\n')
    resolved = (tmp_path / "nope" / "x.secret").resolve()
    assert message == f"{section}.{key} 'nope/x.secret' ({resolved}) does not exist"


@pytest.mark.parametrize(
    ("section", "key"), [("raft", "secret_file"), ("auth", "admin_token_file")]
)
def test_empty_secret_file_is_an_error(tmp_path: Path, section: str, key: str) -> None:
    (tmp_path / "blank").write_text(" \n\n")
    message = error(tmp_path, f'[{section}]\n{key} = "blank"\n')
    assert message.startswith(f"{section}.{key} 'blank' (")
    assert message.endswith(") is empty")


def test_secret_file_that_is_a_directory_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    assert "cannot be read" in error(tmp_path, '[raft]\nsecret_file = "dir"\n')


@pytest.mark.parametrize(
    ("extra", "source"),
    [
        ('[raft]\nsecret = "short-secret"\n', "raft.secret"),
        ('[auth]\nadmin_token = "short-secret"\n', "auth.admin_token"),
        ('[raft]\nsecret_file = "f"\n', "raft.secret_file 'f'"),
        ('[auth]\nadmin_token_file = "f"\n', "auth.admin_token_file 'f'"),
    ],
)
def test_short_secrets_are_errors_that_do_not_echo_them(
    tmp_path: Path, extra: str, source: str
) -> None:
    (tmp_path / "f").write_text("short-secret\n")
    message = error(tmp_path, extra)
    assert message == f"{source} must be at least 16 characters, got 12"
    assert "short-secret" not in message


def test_sixteen_characters_is_enough(tmp_path: Path) -> None:
    assert load(tmp_path, f'[auth]\nadmin_token = "{"x" * 16}"\n').admin_token == "x" * 16


@pytest.mark.parametrize("name", ["SCHEDD_RAFT_SECRET", "SCHEDD_ADMIN_TOKEN"])
def test_short_secret_from_env_names_the_variable(tmp_path: Path, name: str) -> None:
    assert error(tmp_path, env={name: "tiny"}) == f"{name} must be at least 16 characters, got 4"


def test_env_overrides_values_in_the_file(tmp_path: Path) -> None:
    extra = f'[raft]\nsecret = "{"f" * 20}"\n[auth]\nadmin_token = "{"g" * 20}"\n'
    cfg = load(tmp_path, extra, env=CLUSTER_ENV)
    assert (cfg.raft_secret, cfg.admin_token) == (SECRET, TOKEN)


def test_env_overrides_secret_files_which_need_not_exist(tmp_path: Path) -> None:
    extra = (
        '[raft]\npeers = ["h:9702"]\nsecret_file = "missing"\n'
        '[auth]\nadmin_token_file = "missing"\n'
    )
    cfg = load(tmp_path, extra, env=CLUSTER_ENV)
    assert (cfg.raft_secret, cfg.admin_token) == (SECRET, TOKEN)


def test_env_secret_lets_a_multi_node_config_start(tmp_path: Path) -> None:
    cfg = load(tmp_path, '[raft]\npeers = ["h:9702"]\n', env={"SCHEDD_RAFT_SECRET": SECRET})
    assert cfg.raft_secret == SECRET


def test_env_values_are_stripped(tmp_path: Path) -> None:
    cfg = load(tmp_path, env={"SCHEDD_ADMIN_TOKEN": f" {TOKEN}\n"})
    assert cfg.admin_token == TOKEN


@pytest.mark.parametrize("empty", ["", "  "])
def test_empty_env_var_counts_as_unset(tmp_path: Path, empty: str) -> None:
    env = {"SCHEDD_RAFT_SECRET": empty, "SCHEDD_ADMIN_TOKEN": empty}
    cfg = load(tmp_path, f'[auth]\nadmin_token = "{TOKEN}"\n', env=env)
    assert (cfg.raft_secret, cfg.admin_token) == (None, TOKEN)
    assert "refuses to start" in error(tmp_path, '[raft]\npeers = ["h:9702"]\n', env=env)


def test_both_given_in_the_file_is_an_error_even_when_env_overrides(tmp_path: Path) -> None:
    extra = f'[raft]\nsecret = "{SECRET}"\nsecret_file = "x"\n'
    assert "not both" in error(tmp_path, extra, env=CLUSTER_ENV)


def test_env_defaults_to_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEDD_ADMIN_TOKEN", TOKEN)
    monkeypatch.setenv("SCHEDD_RAFT_SECRET", SECRET)
    cfg = load_config(write(tmp_path, BASE))
    assert (cfg.raft_secret, cfg.admin_token) == (SECRET, TOKEN)


def test_repr_never_shows_secrets(tmp_path: Path) -> None:
    cfg = load(tmp_path, env=CLUSTER_ENV)
    assert SECRET not in repr(cfg)
    assert TOKEN not in repr(cfg)


# -- durations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "attribute", "expected"),
    [
        ('[api]\nrequest_timeout = "250ms"\n', "request_timeout_s", 0.25),
        ("[api]\nrequest_timeout = 2\n", "request_timeout_s", 2.0),
        ('[api]\nrequest_timeout = "1m30s"\n', "request_timeout_s", 90.0),
        ('[raft]\ncompaction_min_time = "5m"\n', "compaction_min_time_s", 300.0),
        ('[raft]\ncompaction_min_time = "1s"\n', "compaction_min_time_s", 1.0),
        ('[raft]\nelection_timeout_max = "2500ms"\n', "election_timeout_max_s", 2.5),
        ("[raft]\nelection_timeout_max = 2.5\n", "election_timeout_max_s", 2.5),
        ('[raft]\nelection_timeout_max = "2.5"\n', "election_timeout_max_s", 2.5),
    ],
)
def test_durations(tmp_path: Path, extra: str, attribute: str, expected: float) -> None:
    assert getattr(load(tmp_path, extra), attribute) == expected


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ('[retention]\nruns = "36h"\n', Retention(runs=36 * 3_600_000)),
        ('[retention]\naudit = "1m"\n', Retention(audit=60_000)),
        ("[retention]\nmessages = 3600\n", Retention(messages=3_600_000)),
    ],
)
def test_retention(tmp_path: Path, extra: str, expected: Retention) -> None:
    assert load(tmp_path, extra).retention == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"2GiB"', MinFree(bytes=2 * 1024**3)),
        ('"500MB"', MinFree(bytes=500 * 1000**2)),
        ("1048576", MinFree(bytes=1024**2)),
        ('"7.5%"', MinFree(percent=7.5)),
        ('"0"', MinFree(bytes=0)),
    ],
)
def test_min_free(tmp_path: Path, value: str, expected: MinFree) -> None:
    assert load(tmp_path, f"[storage]\nmin_free = {value}\n").min_free == expected


@pytest.mark.parametrize("value", ['"lots"', '"150%"', '"-1"', "-5", "true", '"5 %%"'])
def test_min_free_must_be_a_size_or_a_percentage(tmp_path: Path, value: str) -> None:
    message = error(tmp_path, f"[storage]\nmin_free = {value}\n")
    assert message.startswith("storage.min_free must be a size like '1GiB' or '5%'"), message


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('[api]\nrequest_timeout = "soon"\n', "api.request_timeout must be a duration like"),
        ('[api]\nrequest_timeout = "0s"\n', "api.request_timeout must be at least 1ms, got '0s'"),
        ("[raft]\nelection_timeout_min = -1\n", "raft.election_timeout_min must be a non-neg"),
        ('[retention]\nruns = "500ms"\n', "retention.runs must be at least 1s, got '500ms'"),
    ],
)
def test_bad_durations(tmp_path: Path, extra: str, message: str) -> None:
    assert error(tmp_path, extra).startswith(message)


def test_fractional_duration_with_a_unit_is_accepted(tmp_path: Path) -> None:
    config = load(tmp_path, '[raft]\nelection_timeout_max = "2.5s"\n')
    assert config.election_timeout_max_s == 2.5


@pytest.mark.parametrize(("low", "high"), [("2s", "2s"), ("2s", "1s")])
def test_election_timeout_max_must_exceed_min(tmp_path: Path, low: str, high: str) -> None:
    extra = f'[raft]\nelection_timeout_min = "{low}"\nelection_timeout_max = "{high}"\n'
    assert error(tmp_path, extra) == (
        "raft.election_timeout_max must be greater than raft.election_timeout_min, "
        f"got {high} <= {low}"
    )


# -- integers, sizes, networks -----------------------------------------------------------------


@pytest.mark.parametrize("partitions", [1, 65_536])
def test_partition_bounds_are_inclusive(tmp_path: Path, partitions: int) -> None:
    assert load(tmp_path, f"[cluster]\npartitions = {partitions}\n").partitions == partitions


@pytest.mark.parametrize("partitions", [0, -1, 65_537])
def test_partitions_out_of_range(tmp_path: Path, partitions: int) -> None:
    message = error(tmp_path, f"[cluster]\npartitions = {partitions}\n")
    assert message == f"cluster.partitions must be 1..65536, got {partitions}"


def test_compaction_min_entries_must_be_positive(tmp_path: Path) -> None:
    message = error(tmp_path, "[raft]\ncompaction_min_entries = 0\n")
    assert message == "raft.compaction_min_entries must be 1..1000000000, got 0"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"64KiB"', 65_536),
        ('"1KiB"', 1024),
        ('"512KiB"', 512 * 1024),
        ('"500KB"', 500_000),
        ('"100KB"', 100_000),
        ('"64 KiB"', 65_536),
        ('"4096B"', 4096),
        ('"4096"', 4096),
        ("4096", 4096),
    ],
)
def test_payload_limit_sizes(tmp_path: Path, value: str, expected: int) -> None:
    extra = f"[delivery]\npayload_limit = {value}\n"
    assert load(tmp_path, extra).delivery.payload_limit_bytes == expected


@pytest.mark.parametrize("value", ['"1KB"', '"513KiB"', '"1MiB"', '"16MiB"', "512", "524289"])
def test_payload_limit_must_be_1kib_to_512kib(tmp_path: Path, value: str) -> None:
    # A job (its payload sealed, base64) must fit one Raft command (MAX_COMMAND_BYTES, 1 MiB)
    message = error(tmp_path, f"[delivery]\npayload_limit = {value}\n")
    assert message.startswith("delivery.payload_limit must be 1KiB..512KiB (a job must fit ")


def test_api_limits_default_to_their_documented_values(tmp_path: Path) -> None:
    cfg = load(tmp_path, "")
    limits = cfg.api_limits
    assert (limits.header_timeout_s, limits.body_timeout_s) == (15.0, 30.0)
    assert (limits.max_body_reads, limits.long_polls_per_tenant) == (64, 32)
    assert (cfg.metrics_listen, cfg.metrics_token) == (None, None)


def test_metrics_listen_off_loopback_needs_a_token(tmp_path: Path) -> None:
    message = error(tmp_path, '[metrics]\nlisten = "0.0.0.0:9464"\n')
    assert message.startswith("metrics.listen '0.0.0.0:9464' is not a loopback address")
    assert load(tmp_path, '[metrics]\nlisten = "127.0.0.1:9464"\n').metrics_listen == (
        "127.0.0.1:9464"
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("[api]\nmax_body_reads = 0\n", "api.max_body_reads must be 1..100000, got 0"),
        ("[api]\nlong_polls_per_tenant = 0\n", "api.long_polls_per_tenant must be 1..100000"),
        ('[api]\nheader_timeout = "1ms"\n', "api.header_timeout "),
        ('[metrics]\nlisten = "9464"\n', "metrics.listen must be"),
    ],
)
def test_api_limits_and_metrics_errors_name_the_key(
    tmp_path: Path, extra: str, expected: str
) -> None:
    assert error(tmp_path, extra).startswith(expected)


@pytest.mark.parametrize(
    "value", ['"1TiB"', '"\u0666\u0664KiB"', '"64kib"', '"-1"', '"1.5MiB"', '"lots"', "1.5"]
)
def test_payload_limit_must_be_a_size(tmp_path: Path, value: str) -> None:
    message = error(tmp_path, f"[delivery]\npayload_limit = {value}\n")
    assert message.startswith("delivery.payload_limit must be a size like '64KiB'")


def test_allow_cidrs_are_normalised(tmp_path: Path) -> None:
    extra = '[delivery]\nallow_cidrs = ["127.0.0.1/8", "::1", "10.0.0.0/8"]\n'
    assert load(tmp_path, extra).delivery.allow_cidrs == ("127.0.0.0/8", "::1/128", "10.0.0.0/8")


@pytest.mark.parametrize("cidr", ["10.0.0.0/33", "nope", "", "10.0.0/8x"])
def test_bad_allow_cidrs(tmp_path: Path, cidr: str) -> None:
    message = error(tmp_path, f'[delivery]\nallow_cidrs = ["10.0.0.0/8", "{cidr}"]\n')
    assert message == f"delivery.allow_cidrs must hold networks like '10.0.0.0/8', got {cidr!r}"


# -- NodeConfig built directly -----------------------------------------------------------------


def test_node_config_checks_its_invariants_when_built_directly(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must list only the OTHER nodes"):
        NodeConfig(
            path=tmp_path,
            node_id="n1",
            data_dir=tmp_path,
            raft_peers=("127.0.0.1:9701",),
            raft_secret=SECRET,
        )
    with pytest.raises(ConfigError, match="refuses to start"):
        NodeConfig(path=tmp_path, node_id="n1", data_dir=tmp_path, raft_peers=("h:1",))
    with pytest.raises(ConfigError, match="election_timeout_max must be greater"):
        NodeConfig(path=tmp_path, node_id="n1", data_dir=tmp_path, election_timeout_max_s=1.0)
    with pytest.raises(ConfigError, match=r"api\.tls_cert '.*' is set but api\.tls_key is not"):
        NodeConfig(path=tmp_path, node_id="n1", data_dir=tmp_path, tls_cert=tmp_path / "c.pem")


def test_node_config_built_directly_has_the_defaults_a_minimal_file_gets(tmp_path: Path) -> None:
    loaded = load(tmp_path)
    assert loaded == NodeConfig(path=loaded.path, node_id="n1", data_dir=loaded.data_dir)


# -- the shipped files -------------------------------------------------------------------------


def test_shipped_single_node_config_loads(tmp_path: Path) -> None:
    cfg = load_config(CONFIG_DIR / "single.toml", env={})
    assert cfg.is_single_node
    assert cfg.data_dir == (REPO / "var" / "single").resolve()
    assert cfg.api_listen == "127.0.0.1:8701"
    assert cfg.raft_listen == "127.0.0.1:9701"
    assert cfg.raft_secret is None
    assert cfg.admin_token is None  # the node generates one
    assert cfg.generate_payload_key and cfg.payload_keys_file is None  # and a payload key


def test_a_generated_payload_key_is_for_a_single_node_without_a_key_file(tmp_path: Path) -> None:
    assert not load(tmp_path).generate_payload_key  # the default: no key, as before
    assert load(tmp_path, "[encryption]\ngenerate_payload_key = true\n").generate_payload_key
    both = '[encryption]\ngenerate_payload_key = true\npayload_keys_file = "k"\n'
    assert "are both set" in error(tmp_path, both)
    peers = '[raft]\npeers = ["127.0.0.1:9702"]\nsecret = "' + SECRET + '"\n'
    message = error(tmp_path, peers + "[encryption]\ngenerate_payload_key = true\n")
    assert "generate_payload_key is for a single node" in message
    wrong = error(tmp_path, '[encryption]\ngenerate_payload_key = "yes"\n')
    assert wrong == "encryption.generate_payload_key must be true or false, got 'yes'"


def load_cluster() -> list[NodeConfig]:
    return [load_config(CONFIG_DIR / f"node{n}.toml", env=CLUSTER_ENV) for n in (1, 2, 3)]


def test_shipped_cluster_configs_describe_three_nodes_on_one_host() -> None:
    nodes = load_cluster()
    assert [cfg.node_id for cfg in nodes] == ["node1", "node2", "node3"]
    assert [cfg.api_listen for cfg in nodes] == [f"127.0.0.1:870{n}" for n in (1, 2, 3)]
    assert [cfg.raft_listen for cfg in nodes] == [f"127.0.0.1:970{n}" for n in (1, 2, 3)]
    assert [cfg.data_dir for cfg in nodes] == [
        (REPO / "var" / f"node{n}").resolve() for n in (1, 2, 3)
    ]
    assert all(cfg.raft_secret == SECRET and cfg.admin_token == TOKEN for cfg in nodes)
    assert len({cfg.partitions for cfg in nodes}) == 1


def test_shipped_cluster_peers_are_exactly_the_other_two_nodes() -> None:
    nodes = load_cluster()
    everyone = {cfg.raft_listen for cfg in nodes}
    for cfg in nodes:
        assert set(cfg.raft_peers) == everyone - {cfg.raft_listen}
        assert len(cfg.raft_peers) == 2
        assert not cfg.is_single_node


def test_shipped_cluster_reads_its_secrets_from_var(tmp_path: Path) -> None:
    shutil.copytree(CONFIG_DIR, tmp_path / "config")
    with pytest.raises(ConfigError, match=r"raft\.secret_file '\.\./var/cluster\.secret' .* does"):
        load_config(tmp_path / "config" / "node1.toml", env={})
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "cluster.secret").write_text(f"{SECRET}\n")
    (tmp_path / "var" / "admin.token").write_text(f"{TOKEN}\n")
    for n in (1, 2, 3):
        cfg = load_config(tmp_path / "config" / f"node{n}.toml", env={})
        assert (cfg.raft_secret, cfg.admin_token) == (SECRET, TOKEN)
        assert cfg.data_dir == (tmp_path / "var" / f"node{n}").resolve()


def test_shipped_systemd_unit_runs_serve_hardened() -> None:
    lines = set((CONFIG_DIR / "schedd@.service").read_text().splitlines())
    assert any(
        line.startswith("ExecStart=") and line.endswith("schedd serve --config /etc/schedd/%i.toml")
        for line in lines
    )
    for expected in [
        "User=schedd",
        "Restart=on-failure",
        "KillSignal=SIGTERM",
        "TimeoutStopSec=30",
        "LimitNOFILE=65536",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ReadWritePaths=/var/lib/schedd/%i",
        "StateDirectory=schedd/%i",
    ]:
        assert expected in lines


def test_shipped_vm_configs_form_one_three_node_cluster() -> None:
    env = {"SCHEDD_RAFT_SECRET": SECRET, "SCHEDD_ADMIN_TOKEN": TOKEN}  # files live on the VMs
    configs = [load_config(CONFIG_DIR / "vm" / f"node{n}.toml", env=env) for n in (1, 2, 3)]
    listens = {cfg.raft_listen for cfg in configs}
    assert len(listens) == 3
    for cfg in configs:
        assert set(cfg.raft_peers) == listens - {cfg.raft_listen}
        assert cfg.data_dir == Path(f"/var/lib/schedd/{cfg.node_id}")
        assert (cfg.partitions, cfg.log_format, cfg.delivery.allow_cidrs) == (256, "json", ())


# -- TLS for the API ----------------------------------------------------------------------------


def test_tls_is_off_by_default(tmp_path: Path) -> None:
    cfg = load(tmp_path)
    assert (cfg.tls_cert, cfg.tls_key, cfg.tls_ca) == (None, None, None)
    assert not cfg.is_tls and cfg.api_url == "http://127.0.0.1:8701"


def test_tls_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        '[api]\nlisten = "10.0.0.11:8701"\n'
        'tls_cert = "tls/node.crt"\ntls_key = "tls/node.key"\ntls_ca = "/etc/schedd/ca.crt"\n',
    )
    assert cfg.tls_cert == (tmp_path / "tls" / "node.crt").resolve()
    assert cfg.tls_key == (tmp_path / "tls" / "node.key").resolve()
    assert cfg.tls_ca == Path("/etc/schedd/ca.crt")
    assert cfg.is_tls and cfg.api_url == "https://10.0.0.11:8701"


def test_ipv6_api_url_keeps_its_brackets(tmp_path: Path) -> None:
    cfg = load(tmp_path, '[api]\nlisten = "[::1]:8701"\ntls_cert = "a.crt"\ntls_key = "a.key"\n')
    assert cfg.api_url == "https://[::1]:8701"


@pytest.mark.parametrize(
    ("given", "missing"), [("tls_cert", "api.tls_key"), ("tls_key", "api.tls_cert")]
)
def test_tls_cert_and_key_come_together(tmp_path: Path, given: str, missing: str) -> None:
    message = error(tmp_path, f'[api]\n{given} = "node.pem"\n')
    assert message.startswith(f"api.{given} '{(tmp_path / 'node.pem').resolve()}' is set but ")
    assert f"but {missing} is not" in message


def test_tls_ca_alone_is_allowed(tmp_path: Path) -> None:
    # A node still on HTTP can verify peers that already serve HTTPS (a rolling switch).
    cfg = load(tmp_path, '[api]\ntls_ca = "ca.crt"\n')
    assert cfg.tls_ca == (tmp_path / "ca.crt").resolve() and not cfg.is_tls


def test_tls_keys_must_be_strings(tmp_path: Path) -> None:
    assert error(tmp_path, "[api]\ntls_ca = 1\n") == "api.tls_ca must be a string, got 1"


def test_a_misspelt_tls_key_hints_at_the_right_one(tmp_path: Path) -> None:
    assert "did you mean 'api.tls_cert'" in error(tmp_path, '[api]\ntls_crt = "a"\n')


@pytest.mark.parametrize("n", [1, 2, 3])
def test_shipped_vm_configs_serve_https_once_the_tls_lines_are_uncommented(
    tmp_path: Path, n: int
) -> None:
    text = (CONFIG_DIR / "vm" / f"node{n}.toml").read_text()
    uncommented = re.sub(r"^# (tls_\w+ = )", r"\1", text, flags=re.MULTILINE)
    assert uncommented.count("\ntls_") == 3
    env = {"SCHEDD_RAFT_SECRET": SECRET, "SCHEDD_ADMIN_TOKEN": TOKEN}
    cfg = load_config(write(tmp_path, uncommented), env=env)
    assert cfg.api_url == f"https://10.0.0.1{n}:8701"
    assert (cfg.tls_cert, cfg.tls_key, cfg.tls_ca) == (
        Path("/etc/schedd/tls.crt"),
        Path("/etc/schedd/tls.key"),
        Path("/etc/schedd/ca.crt"),
    )


# -- cells (docs/scaling.md §4) ----------------------------------------------------------------

CELL = '[cells]\netcd = ["http://127.0.0.1:2379/", "https://etcd-2:2379"]\ncell = "c1"\n'


def test_a_range_with_cells_is_a_share_of_the_cells_partition_count(tmp_path: Path) -> None:
    cfg = load(tmp_path, '[cluster]\npartitions = "0-511"\n' + CELL)
    assert (cfg.partitions, cfg.partition_range, cfg.has_cells) == (1024, (0, 511), True)
    assert cfg.cells.etcd == ("http://127.0.0.1:2379", "https://etcd-2:2379")
    assert (cfg.cells.cell, cfg.cells.deployment) == ("c1", "default")
    cfg = load(tmp_path, '[cluster]\npartitions = "64-127"\n' + CELL + "partitions = 128\n")
    assert (cfg.partitions, cfg.partition_range) == (128, (64, 127))


def test_without_cells_a_count_is_as_before(tmp_path: Path) -> None:
    cfg = load(tmp_path, "[cluster]\npartitions = 512\n")
    assert (cfg.partitions, cfg.partition_range, cfg.has_cells) == (512, None, False)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            '[cluster]\npartitions = "0-511"\n',
            'cluster.partitions is a range ("0-511") but cells.etcd is not set',
        ),
        ('[cluster]\npartitions = "0-511"\n[cells]\ncell = "c1"\n', "cluster.partitions is a"),
        (
            '[cluster]\npartitions = "0-511"\n[cells]\netcd = ["http://e:1"]\n',
            "cells.etcd is set but cells.cell is not",
        ),
        (CELL, "cells.cell is set but cluster.partitions is a count, not a range"),
        ('[cells]\ndeployment = "x"\n', "cells.deployment is set but cluster.partitions is a"),
        (
            '[cluster]\npartitions = "0-1024"\n' + CELL,
            'cluster.partitions "0-1024" must lie in 0..1023 (cells.partitions = 1024)',
        ),
        ('[cluster]\npartitions = "9-3"\n' + CELL, 'cluster.partitions "9-3" must lie in'),
        ('[cluster]\npartitions = "0-9"\n' + CELL.replace('"c1"', '"C 1"'), "cells.cell must be"),
        (
            '[cluster]\npartitions = "0-9"\n' + CELL.replace("http://127.0.0.1:2379/", "ftp://e"),
            "cells.etcd must hold http:// or https:// URLs of etcd, got 'ftp://e'",
        ),
        ('[cluster]\npartitions = "0-9"\n' + CELL + "partitions = 0\n", "cells.partitions must"),
        ('[cluster]\npartitions = "a-b"\n' + CELL, "cluster.partitions must be an integer"),
    ],
)
def test_cells_errors_name_the_fields(tmp_path: Path, extra: str, message: str) -> None:
    assert error(tmp_path, extra).startswith(message)


HTTPS_CELL = (
    '[cluster]\npartitions = "0-511"\n[cells]\netcd = ["https://etcd-1:2379"]\ncell = "c1"\n'
)


def test_etcd_tls_files_are_read_beside_the_config(tmp_path: Path) -> None:
    tls = 'etcd_cacert = "pki/ca.crt"\netcd_cert = "pki/n1.crt"\netcd_key = "pki/n1.key"\n'
    cfg = load(tmp_path, HTTPS_CELL + tls)
    assert cfg.cells.etcd_cacert is not None and cfg.cells.etcd_cacert.name == "ca.crt"
    assert cfg.cells.etcd_cacert.is_absolute()
    assert (cfg.cells.etcd_cert, cfg.cells.etcd_key) == (
        cfg.cells.etcd_cacert.parent / "n1.crt",
        cfg.cells.etcd_cacert.parent / "n1.key",
    )
    assert load(tmp_path, HTTPS_CELL).cells.has_etcd_tls is False


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (HTTPS_CELL + 'etcd_cert = "n1.crt"\n', "cells.etcd_cert is set but cells.etcd_key is not"),
        (HTTPS_CELL + 'etcd_key = "n1.key"\n', "cells.etcd_key is set but cells.etcd_cert is not"),
        (
            HTTPS_CELL.replace("https://", "http://") + 'etcd_cacert = "ca.crt"\n',
            "cells.etcd_cacert is set but cells.etcd holds 'http://etcd-1:2379': TLS to etcd",
        ),
        (HTTPS_CELL + "etcd_cacert = 7\n", "cells.etcd_cacert must be"),
    ],
)
def test_etcd_tls_errors_name_the_fields(tmp_path: Path, extra: str, message: str) -> None:
    assert error(tmp_path, extra).startswith(message)
