"""What `schedd dev` prints once ready, and the demo tenant credentials it keeps."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from schedd.cli import devcluster
from schedd.cli.devcluster import Demo, banner, demo_tenant, schedctl_dir

URLS = ["http://127.0.0.1:8701", "http://127.0.0.1:8702", "http://127.0.0.1:8703"]
DEMO = Demo("sk_abc-DEF_1", "whsec_c2VjcmV0+/=")
CREATED = {"tenant_id": "tnt_1", "token": "sk_new", "signing_secret": "whsec_new="}


def run_in_sh(lines: list[str], *names: str) -> list[str]:
    """Paste the lines after "# in another shell:" into sh, then print the named variables."""
    pasted = lines[lines.index("# in another shell:") :]
    script = "\n".join([*pasted, *(f'printf "%s\\n" "${name}"' for name in names)])
    result = subprocess.run(
        ["sh", "-c", script], capture_output=True, text=True, timeout=10, check=True
    )
    return result.stdout.splitlines()


def test_the_export_line_lists_every_node_and_the_demo_token(tmp_path: Path) -> None:
    lines = banner(URLS, tmp_path, DEMO, tmp_path / "bin")
    assert run_in_sh(lines, "SCHEDCTL_URL", "SCHEDCTL_TOKEN") == [",".join(URLS), DEMO.token]


def test_the_path_line_puts_schedctl_first_on_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / 'a $b `c` "d"'
    lines = banner(URLS, tmp_path, DEMO, bin_dir)
    assert 'export PATH="' in "\n".join(lines)
    path = run_in_sh(lines, "PATH")[0]
    assert path.split(":")[0] == str(bin_dir)
    assert len(path.split(":")) > 1  # the user's PATH follows


def test_without_a_schedctl_there_is_no_path_line(tmp_path: Path) -> None:
    assert not any("PATH" in line for line in banner(URLS, tmp_path, DEMO, None))


def test_the_signing_secret_and_where_it_is_kept_are_printed(tmp_path: Path) -> None:
    text = "\n".join(banner(URLS, tmp_path, DEMO, None))
    assert DEMO.signing_secret in text
    assert str(tmp_path / "demo.signing_secret") in text
    assert str(tmp_path / "demo.token") in text


def test_schedctl_dir_is_where_this_pythons_schedctl_is() -> None:
    found = schedctl_dir()
    assert found == Path(sys.executable).absolute().parent
    assert (found / "schedctl").exists()


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The admin requests demo_tenant makes, answered like a node would."""
    calls: list[tuple[str, str]] = []

    def call(url: str, token: str, method: str = "GET", body: Any = None) -> Any:
        calls.append((method, url.split("127.0.0.1:8701", 1)[1]))
        if url.endswith("/v1/tenants?limit=1000"):
            return {
                "tenants": [
                    {"tenant_id": "tnt_0", "name": "x"},
                    {"tenant_id": "tnt_1", "name": "demo"},
                ]
            }
        return CREATED

    monkeypatch.setattr(devcluster, "_call", call)
    return calls


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_demo_credentials_are_stored_0600_and_kept(
    tmp_path: Path, api: list[tuple[str, str]]
) -> None:
    first = demo_tenant(tmp_path, URLS[0], "adm_x")
    assert first == Demo("sk_new", "whsec_new=")
    assert api == [("POST", "/v1/tenants")]
    for name, value in (("demo.token", "sk_new"), ("demo.signing_secret", "whsec_new=")):
        assert (tmp_path / name).read_text().strip() == value
        assert mode(tmp_path / name) == 0o600
    assert demo_tenant(tmp_path, URLS[0], "adm_x") == first  # the next run of `schedd dev`
    assert len(api) == 1


def test_a_data_dir_without_the_secret_rotates_the_demo_tenant_once(
    tmp_path: Path, api: list[tuple[str, str]]
) -> None:
    (tmp_path / "demo.token").write_text("sk_old\n")  # an older `schedd dev` kept only this
    assert demo_tenant(tmp_path, URLS[0], "adm_x") == Demo("sk_new", "whsec_new=")
    assert api == [("GET", "/v1/tenants?limit=1000"), ("POST", "/v1/tenants/tnt_1/rotate")]
    assert mode(tmp_path / "demo.signing_secret") == 0o600
    assert mode(tmp_path / "demo.token") == 0o600
