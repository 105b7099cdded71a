"""The zipapp under the shipped systemd unit (issue 13, point 7): the SHIV_ROOT the unit and
docs/operations.md set lies where the unit lets the node write, and a shiv zipapp unpacks there
when every other path (its home included) is read-only."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "config" / "schedd@.service"
OPERATIONS = REPO / "docs" / "operations.md"
NODE = "node1"
HOME = PurePosixPath("/var/lib/schedd")  # the schedd user's home (useradd in the unit's header)
NOBODY = 65534
SHIV_ROOT = re.compile(r"SHIV_ROOT=([^\s`'\"]+)")


def service_settings() -> dict[str, list[str]]:
    """The [Service] section's assignments, each key's values in order, %i made NODE."""
    settings: dict[str, list[str]] = {}
    section = ""
    for raw in UNIT.read_text().splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            settings.setdefault(key, []).append(value.replace("%i", NODE))
    return settings


def writable_paths(settings: dict[str, list[str]]) -> list[PurePosixPath]:
    """What ProtectSystem=strict leaves writable: ReadWritePaths= and StateDirectory=."""
    paths = [
        PurePosixPath(p.lstrip("-+")) for v in settings.get("ReadWritePaths", []) for p in v.split()
    ]
    paths += [
        PurePosixPath("/var/lib") / p for v in settings.get("StateDirectory", []) for p in v.split()
    ]
    return paths


def unit_shiv_root() -> PurePosixPath:
    """The SHIV_ROOT the unit's Environment= sets (the test fails if it sets none)."""
    found = [m for v in service_settings().get("Environment", []) for m in SHIV_ROOT.findall(v)]
    assert len(found) == 1, f"the unit sets SHIV_ROOT once in Environment=, not {found}"
    return PurePosixPath(found[0])


def documented_shiv_roots() -> list[PurePosixPath]:
    text = OPERATIONS.read_text().replace("<node>", NODE).replace("%i", NODE)
    return [PurePosixPath(p) for p in SHIV_ROOT.findall(text)]


def test_the_shiv_root_the_unit_and_docs_set_is_writable_under_the_unit() -> None:
    settings = service_settings()
    assert settings["ProtectSystem"] == ["strict"]  # so nothing else is writable
    allowed = writable_paths(settings)
    assert documented_shiv_roots(), "docs/operations.md names the SHIV_ROOT to use"
    for root in [unit_shiv_root(), *documented_shiv_roots()]:
        assert any(root.is_relative_to(a) for a in allowed), f"{root} is not in {allowed}"
        assert not HOME.is_relative_to(root)  # the home stays read-only


# The zipapp, run as the unit runs it: ------------------------------------------------------

STUB = 'def main():\n    print("stub ok")\n'


def runner_python() -> str:
    """A python3 an unprivileged user can run (the venv's may live under a 0700 /root)."""
    if os.geteuid() != 0:
        return sys.executable
    found = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    assert found, "the test runs the zipapp as nobody: it needs a system python3"
    return found


@pytest.fixture(scope="module")
def fake_root() -> Iterator[Path]:
    """A tree that mirrors the unit's view: /var/lib/schedd (HOME) read-only for the node's user,
    /var/lib/schedd/node1 (its state directory) writable, a small zipapp in /usr/local/bin."""
    top = Path(tempfile.mkdtemp(prefix="schedd-zipapp-"))
    top.chmod(0o755)  # nobody must reach it: pytest's tmp_path is 0700
    try:
        home = top / HOME.relative_to("/")
        state = home / NODE
        state.mkdir(parents=True)
        source = top / "src"
        source.mkdir()
        (source / "stubapp.py").write_text(STUB)
        app = top / "usr/local/bin/stub.pyz"
        app.parent.mkdir(parents=True)
        shiv = [sys.executable, "-m", "shiv", "--site-packages", str(source)]
        shiv += ["-e", "stubapp:main", "-p", "/usr/bin/env python3", "-o", str(app)]
        subprocess.run(shiv, check=True, capture_output=True, timeout=60)
        for d in (top, top / "var", top / "var/lib", home, app.parent.parent, app.parent):
            d.chmod(0o555)
        app.chmod(0o555)
        if os.geteuid() == 0:
            os.chown(state, NOBODY, NOBODY)  # the unit's User= owns its state directory
        yield top
    finally:
        for walked, _, _ in os.walk(top):
            Path(walked).chmod(0o755)
        shutil.rmtree(top)


def run_app(top: Path, shiv_root: PurePosixPath | None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(top / HOME.relative_to("/"))}
    if shiv_root is not None:
        env["SHIV_ROOT"] = str(top / shiv_root.relative_to("/"))
    as_nobody = {"user": NOBODY, "group": NOBODY, "extra_groups": []} if os.geteuid() == 0 else {}
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [runner_python(), str(top / "usr/local/bin/stub.pyz")],
        cwd=top / HOME.relative_to("/") / NODE,  # the unit's WorkingDirectory=
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        **as_nobody,
    )


def test_without_shiv_root_the_zipapp_cannot_unpack_into_the_read_only_home(
    fake_root: Path,
) -> None:
    result = run_app(fake_root, None)
    assert result.returncode != 0 and "PermissionError" in result.stderr


def test_the_zipapp_unpacks_into_the_units_shiv_root(fake_root: Path) -> None:
    root = unit_shiv_root()
    result = run_app(fake_root, root)
    assert (result.returncode, result.stdout) == (0, "stub ok\n"), result.stderr
    assert any((fake_root / root.relative_to("/")).iterdir())  # unpacked there


def test_the_zipapp_unpacks_into_the_documented_shiv_root(fake_root: Path) -> None:
    for root in documented_shiv_roots():
        result = run_app(fake_root, root)
        assert (result.returncode, result.stdout) == (0, "stub ok\n"), result.stderr
