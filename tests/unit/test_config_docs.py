"""The settings table (`schedd.config.SETTINGS`, declared by NodeConfig's fields) and the docs
agree: docs/configuration.md lists every key with its default, and the example in the shared
contract (../shared/docs/CONFIG.md) uses only known keys, showing defaults where it shows them."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from schedd.config import KEYS, SCHEMA, SETTINGS, Setting, Source

REPO = Path(__file__).resolve().parents[2]
CONFIGURATION_MD = REPO / "docs" / "configuration.md"
CONTRACT_MD = REPO.parent / "shared" / "docs" / "CONFIG.md"
# The keys CONFIG.md's example sets to a value of its own rather than the default.
EXAMPLE_VALUES = {
    "node.id",
    "node.data_dir",
    "api.tls_cert",
    "api.tls_key",
    "raft.peers",
    "raft.secret",
    "auth.admin_token",
}
_SECTION = re.compile(r"^### `\[(\w+)\]`(.*?)(?=^##)", re.MULTILINE | re.DOTALL)
_ROW = re.compile(r"^\| `(\w+)` \| ([^|]+?) \|", re.MULTILINE)


def documented_defaults() -> dict[str, str]:
    """{"api.max_body_reads": "`64`", ...}: the default column of every key table."""
    text = CONFIGURATION_MD.read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for section, body in _SECTION.findall(text):  # up to the next heading
        for key, default in _ROW.findall(body):
            assert f"{section}.{key}" not in found, f"{section}.{key} is listed twice"
            found[f"{section}.{key}"] = default.strip()
    return found


def parsed(about: Setting, value: object, tmp_path: Path) -> object:
    return about.parse(value, about.key, Source({}, tmp_path, {}))


def test_the_table_is_what_the_loader_accepts() -> None:
    assert len(set(KEYS)) == len(KEYS)
    assert tuple(f"{section}.{key}" for section, keys in SCHEMA.items() for key in keys) == KEYS
    assert {about.key for about in SETTINGS if about.is_required} == {"node.id", "node.data_dir"}


def test_configuration_md_lists_every_key_and_no_other() -> None:
    assert sorted(documented_defaults()) == sorted(KEYS)


@pytest.mark.parametrize("about", SETTINGS, ids=lambda about: about.key)
def test_configuration_md_shows_each_default(about: Setting, tmp_path: Path) -> None:
    shown = documented_defaults()
    cell = shown[about.key]
    for companion in about.companions:  # raft.secret_file: the secret's other source
        assert shown[companion] == "none", companion
    if about.is_required:
        assert cell == "**required**"
    elif about.default is None:
        assert not cell.startswith("`"), f"{about.key}: the docs show {cell}, the default is none"
    else:
        literal = re.fullmatch(r"`(.+)`", cell)
        assert literal, f"{about.key}: the docs show {cell!r}, not a TOML value"
        value = tomllib.loads(f"v = {literal[1]}")["v"]
        assert parsed(about, value, tmp_path) == about.default, about.key


@pytest.mark.skipif(not CONTRACT_MD.exists(), reason=f"{CONTRACT_MD} is not next to the repo")
def test_the_contract_example_uses_known_keys_and_shows_defaults(tmp_path: Path) -> None:
    text = CONTRACT_MD.read_text(encoding="utf-8")
    block = re.search(r"```toml\n(.*?)```", text, re.DOTALL)
    assert block is not None
    example = tomllib.loads(block[1])
    given = {f"{name}.{key}": v for name, table in example.items() for key, v in table.items()}
    assert set(given) <= set(KEYS), set(given) - set(KEYS)
    by_key = {about.key: about for about in SETTINGS}
    for key, value in given.items():
        if key not in EXAMPLE_VALUES:
            assert parsed(by_key[key], value, tmp_path) == by_key[key].default, key
