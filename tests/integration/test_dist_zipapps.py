"""The zipapps `make dist` builds, under every Python interpreter on this machine (issue 34): each
supported one runs both files, imports every schedd module from them and serves one node until
/readyz answers; every other one is refused at start with the message naming the supported ones.

Built before the fix on 3.11.7, schedd.pyz lacked async-timeout, which redis imports below
3.11.3: Debian's /usr/bin/python3 (3.11.2) failed on `import redis.asyncio`, and the compiled
parts (msgspec, aiohttp) were for 3.11 alone, so 3.12 and 3.13 could not start it either.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from tests.ports import free_ports
from tests.servers import ADMIN_TOKEN, SINGLE_NODE_ELECTION, http, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_S = 300  # resolving and installing wheels for three minors: about 30 s here
RUN_TIMEOUT_S = 60  # one run of a file; the first under an interpreter also compiles its .pyc


def build_dist() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_dist", ROOT / "tools" / "build_dist.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PYTHONS: tuple[tuple[int, int], ...] = build_dist().PYTHONS
# Python 2.7 syntax: the unsupported interpreters on this machine answer it too.
PROBE = (
    "import os, platform, sys; sys.stdout.write('%s\\n%s\\n%s\\n%s\\n' % ("
    "os.path.realpath(sys.executable), sys.prefix, platform.python_implementation(), "
    "platform.python_version()))"
)


@dataclass(frozen=True)
class Interpreter:
    path: str
    implementation: str
    version: str

    @property
    def is_supported(self) -> bool:
        minor = tuple(int(part) for part in self.version.split(".")[:2])
        return self.implementation == "CPython" and minor in PYTHONS

    def __str__(self) -> str:
        return f"{self.path} ({self.implementation} {self.version})"


def candidates() -> list[str]:
    """/usr/bin's and /usr/local/bin's pythons, the venv's, those on PATH, pyenv's versions."""
    found = [sys.executable]
    for folder in (Path("/usr/bin"), Path("/usr/local/bin")):
        found += sorted(
            str(p) for p in folder.glob("python*") if re.fullmatch(r"python[\d.]*", p.name)
        )
    for name in ("python3", "python", *(f"python3.{minor}" for minor in range(6, 20))):
        on_path = shutil.which(name)
        if on_path:
            found.append(on_path)
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for version in sorted(pyenv.glob("*")) if pyenv.is_dir() else []:
        for name in ("python3", "python"):
            if (version / "bin" / name).exists():
                found.append(str(version / "bin" / name))
                break
    return found


def probe(path: str) -> tuple[str, str, str, str] | None:
    """(real executable, prefix, implementation, version) of what `path` runs, or None."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        done = subprocess.run(
            [path, "-c", PROBE], capture_output=True, text=True, timeout=30, check=False
        )
        if done.returncode == 0:
            real, prefix, implementation, version = done.stdout.split("\n")[:4]
            return real, prefix, implementation, version
    return None


def interpreters() -> list[Interpreter]:
    """Each interpreter once (a venv counts apart from its base: its site-packages differ);
    a name that runs nothing (a pyenv shim of a version not selected) is none. Probed side by
    side: every xdist worker collects this file."""
    paths = candidates()
    with ThreadPoolExecutor(max_workers=8) as pool:
        probes = list(pool.map(probe, paths))
    seen: dict[tuple[str, str], Interpreter] = {}
    for path, found in zip(paths, probes, strict=True):
        if found is not None:
            real, prefix, implementation, version = found
            seen.setdefault((real, prefix), Interpreter(path, implementation, version))
    return list(seen.values())


FOUND = interpreters()
SUPPORTED = [i for i in FOUND if i.is_supported]
OTHERS = [i for i in FOUND if not i.is_supported]


@dataclass(frozen=True)
class Dist:
    schedd: Path
    schedctl: Path
    shiv_root: Path
    top: Path


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """Both files, built as `make dist` builds them, into a temporary folder."""
    top = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_dist.py"), "--out", str(top / "dist")],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    return Dist(top / "dist/schedd.pyz", top / "dist/schedctl.pyz", top / "shiv", top)


def run(interpreter: Interpreter, app: Path, *args: str, env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run(
        [interpreter.path, str(app), *args],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env=env,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def app_env(dist: Dist, **extra: str) -> dict[str, str]:
    return {**os.environ, "SHIV_ROOT": str(dist.shiv_root), **extra}


# Every module of schedd, imported from the file (a marker-dropped dependency fails here), and
# where msgspec's compiled part came from (the file's own, for this minor).
IMPORT_ALL = """
import importlib, pkgutil, schedd, msgspec._core
names = [m.name for m in pkgutil.walk_packages(schedd.__path__, "schedd.")]
for name in names:
    if not name.endswith("__main__"):
        importlib.import_module(name)
print(len(names), msgspec._core.__file__)
"""


def test_the_interpreters_of_the_issue_are_found_and_supported() -> None:
    supported = {i.path for i in SUPPORTED}
    assert sys.executable in supported
    if Path("/usr/bin/python3").exists():
        assert "/usr/bin/python3" in supported, [str(i) for i in FOUND]


@pytest.mark.parametrize("interpreter", SUPPORTED, ids=str)
def test_a_supported_interpreter_runs_both_files(dist: Dist, interpreter: Interpreter) -> None:
    env = app_env(dist)
    code, out = run(interpreter, dist.schedd, "--help", env=env)
    assert code == 0 and "serve" in out, out
    code, out = run(interpreter, dist.schedctl, "--help", env=env)
    assert code == 0 and "Usage: schedctl" in out, out

    code, out = run(
        interpreter, dist.schedd, "-c", IMPORT_ALL, env=app_env(dist, SHIV_INTERPRETER="1")
    )
    assert code == 0, out
    count, core = out.split()
    assert int(count) > 100
    major, minor = interpreter.version.split(".")[:2]
    assert Path(core).is_relative_to(dist.shiv_root) and f".cpython-{major}{minor}-" in core, core

    serve_one_node(dist, interpreter)


def serve_one_node(dist: Dist, interpreter: Interpreter) -> None:
    """`schedd.pyz serve` with a one-node config: /readyz answers 200, SIGTERM stops it (0)."""
    api, raft = free_ports(2)
    tag = interpreter.version + "-" + re.sub(r"\W", "_", interpreter.path)
    config = dist.top / f"node-{tag}.toml"
    config.write_text(
        f'[node]\nid = "n1"\ndata_dir = "{dist.top / ("data-" + tag)}"\n\n'
        f'[api]\nlisten = "127.0.0.1:{api}"\n\n'
        f'[raft]\nlisten = "127.0.0.1:{raft}"\npeers = []\n{SINGLE_NODE_ELECTION}'
    )
    log_path = dist.top / f"node-{tag}.log"
    with log_path.open("wb") as log:
        node = subprocess.Popen(
            [interpreter.path, str(dist.schedd), "serve", "--config", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=app_env(dist, SCHEDD_ADMIN_TOKEN=ADMIN_TOKEN),
        )
    try:
        wait_for(lambda: is_ready(node, api, log_path), RUN_TIMEOUT_S, "/readyz 200")
        node.send_signal(signal.SIGTERM)
        assert node.wait(timeout=30) == 0, log_path.read_text(errors="replace")
    finally:
        if node.poll() is None:
            node.kill()
            node.wait(timeout=10)


def is_ready(node: subprocess.Popen[bytes], api: int, log_path: Path) -> bool:
    assert node.poll() is None, f"the node exited:\n{log_path.read_text(errors='replace')}"
    with contextlib.suppress(OSError):
        status, _, _ = http("GET", f"http://127.0.0.1:{api}/readyz", token=None, timeout_s=2)
        return status == 200
    return False


def runs_on() -> str:
    """What the files say, and the docs, of the interpreters they run on."""
    minors = [f"{major}.{minor}" for major, minor in PYTHONS]
    return f"runs on CPython {', '.join(minors[:-1])} or {minors[-1]} (any patch level)"


def test_other_interpreters_are_refused_naming_the_supported_ones(dist: Dist) -> None:
    for interpreter in OTHERS:
        for app in (dist.schedd, dist.schedctl):
            code, out = run(interpreter, app, "--help", env=app_env(dist))
            assert code == 1, out
            assert f"{app.name} {runs_on()}" in out, out
            assert f"is {interpreter.implementation} {interpreter.version}." in out, out
            assert "Traceback" not in out, out


def test_the_docs_name_the_interpreters_the_files_run_on() -> None:
    text = " ".join((ROOT / "docs" / "operations.md").read_text().split())
    assert runs_on() in text
