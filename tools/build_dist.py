"""Build dist/schedd.pyz and dist/schedctl.pyz (`make dist`): shiv zipapps that run on each
CPython minor in PYTHONS, at any patch level, checked by the file itself before it unpacks.

pip resolves dependencies for the interpreter that runs it: an environment marker false here
leaves out a package that another patch level imports (redis needs async-timeout below 3.11.3,
aiohttp and icalendar typing-extensions below 3.13), and a compiled wheel is for one minor only.
So: every requirement whose marker holds for some version in PYTHONS joins the resolution; the
resolved versions are installed once per minor from that minor's wheels; the trees are merged
(pure files must be identical, extension modules sit side by side under their own tags); and the
zipapp's __main__.py refuses any other interpreter with a message naming the ones it runs on.
Uses the registries pip is configured with, as `make install` does. Issue 34, docs/operations.md.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from packaging import tags
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PYTHONS = ((3, 11), (3, 12), (3, 13))  # what the files run on: docs/operations.md says the same
PATCH_LEVELS = range(0, 40)  # the patch levels markers are evaluated at, per minor
APPS = ("schedd", "schedctl")
# manylinux tags older than PEP 600's form, by the glibc they need
LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}

GUARD = """\
# -*- coding: utf-8 -*-
# Written by tools/build_dist.py: checks the interpreter before shiv's bootstrap unpacks anything.
# Python 2.7 syntax on purpose, so that any python can say why it cannot run this file.
import os
import platform
import sys

PYTHONS = {pythons!r}
MACHINE = {machine!r}
GLIBC = {glibc!r}


def _glibc():
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        found = ""
    name, _, version = found.partition(" ")
    if name != "glibc":
        return None
    return tuple(int(part) for part in version.split(".")[:2] if part.isdigit())


def _refused():
    here = "%s %s" % (platform.python_implementation(), platform.python_version())
    if platform.python_implementation() != "CPython" or tuple(sys.version_info[:2]) not in PYTHONS:
        return here
    if not sys.platform.startswith("linux") or platform.machine() != MACHINE:
        return "%s on %s %s" % (here, platform.system(), platform.machine())
    glibc = _glibc()
    if GLIBC is not None and (glibc is None or glibc < GLIBC):
        found = "glibc %s" % ".".join(str(p) for p in glibc) if glibc else "no glibc"
        return "%s with %s" % (here, found)
    return None


def _check():
    refused = _refused()
    if refused is None:
        return
    name = os.path.basename(sys.argv[0]) or "this file"
    minors = ["%d.%d" % minor for minor in PYTHONS]
    runs_on = "CPython %s or %s (any patch level) on Linux %s" % (
        ", ".join(minors[:-1]), minors[-1], MACHINE)
    if GLIBC is not None:
        runs_on += " with glibc %d.%d or newer" % GLIBC
    sys.stderr.write("%s runs on %s; %s is %s.\\n" % (name, runs_on, sys.executable, refused))
    sys.stderr.write(
        "Run it with one of those (python%s %s ...), or install schedd from its wheels "
        "(docs/operations.md, Install).\\n" % (minors[-1], name)
    )
    sys.exit(1)


_check()
"""


def pip(*args: str) -> None:
    """`python -m pip ARGS`, with pip's configuration (pip.conf, PIP_*) as `make install` has it."""
    run(sys.executable, "-m", "pip", *args)


def run(*command: str) -> None:
    """A build step; its output is shown only when it fails, and the build stops there."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"build_dist: exit {done.returncode} from {' '.join(command[:5])} ...")


def marker_environments() -> list[dict[str, str]]:
    """This machine's marker environment at every supported minor and patch level."""
    here = {key: str(value) for key, value in default_environment().items()}
    found = []
    for major, minor in PYTHONS:
        for patch in PATCH_LEVELS:
            full = f"{major}.{minor}.{patch}"
            found.append(
                here
                | {"python_version": f"{major}.{minor}", "python_full_version": full}
                | {"implementation_version": full, "implementation_name": "cpython"}
                | {"platform_python_implementation": "CPython"}
            )
    return found


def conditional_requirements(report: dict[str, Any]) -> set[str]:
    """The requirements of the resolved packages whose markers hold at some supported version
    (here or not), without their markers: they join the next resolution."""
    environments = marker_environments()
    needed: set[str] = set()
    for item in report["install"]:
        extras = ["", *item.get("requested_extras", [])]
        for line in item["metadata"].get("requires_dist", []):
            req = Requirement(line)
            if req.marker is None:
                continue
            if any(
                req.marker.evaluate(env | {"extra": extra})
                for env in environments
                for extra in extras
            ):
                req.marker = None
                needed.add(str(req))
    return needed


def resolve(work: Path) -> tuple[Path, list[str]]:
    """The project's wheel and the pins (`name==version`) of every dependency any supported
    version needs, resolved together; wheels built from sdists are left in work/wheels."""
    wheels = work / "wheels"
    extra: set[str] = set()
    while True:
        pip("wheel", "--quiet", "--wheel-dir", str(wheels), str(ROOT), *sorted(extra))
        (project,) = wheels.glob("schedd-*.whl")
        report_path = work / "report.json"
        pip(
            *("install", "--quiet", "--dry-run", "--ignore-installed", "--no-index"),
            *("--find-links", str(wheels), "--report", str(report_path)),
            str(project),
            *sorted(extra),
        )
        report = json.loads(report_path.read_text())
        needed = conditional_requirements(report)
        if needed <= extra:
            break
        extra |= needed
    pins = [
        f"{item['metadata']['name']}=={item['metadata']['version']}"
        for item in report["install"]
        if canonicalize_name(item["metadata"]["name"]) != "schedd"
    ]
    return project, sorted(pins)


def install_for(minor: tuple[int, int], project: Path, pins: list[str], work: Path) -> Path:
    """The pinned packages, from wheels for CPython `minor` on this machine's platform."""
    target = work / f"cp{minor[0]}{minor[1]}"
    platforms = [arg for tag in tags.platform_tags() for arg in ("--platform", tag)]
    pip(
        *("install", "--quiet", "--no-deps", "--no-compile", "--only-binary=:all:"),
        *("--target", str(target), "--find-links", str(work / "wheels")),
        *("--implementation", "cp", "--python-version", f"{minor[0]}.{minor[1]}"),
        *("--abi", f"cp{minor[0]}{minor[1]}", *platforms),
        str(project),
        *pins,
    )
    forget_origin(target)
    return target


def forget_origin(target: Path) -> None:
    """Drop the direct_url.json pip writes for the project's wheel (its path in this build's
    scratch folder, its hash with the build's timestamps): two builds of one checkout give the
    same files."""
    for origin in target.glob("*.dist-info/direct_url.json"):
        record = origin.parent / "RECORD"
        lines = record.read_text().splitlines(keepends=True)
        record.write_text(
            "".join(
                line
                for line in lines
                if not line.startswith(f"{origin.parent.name}/direct_url.json,")
            )
        )
        origin.unlink()


def is_binary(relative: Path) -> bool:
    """An extension module or a shared library a wheel bundles: kept side by side per minor."""
    return relative.suffix == ".so" or ".so." in relative.name


def merge(trees: list[Path], into: Path) -> None:
    """One site-packages from the per-minor trees: their pure files must be identical (a wheel
    that differs per minor beyond its compiled parts fails the build), compiled parts add up.
    Only dist-info files (RECORD, WHEEL) may differ: the first tree's are kept."""
    shutil.copytree(trees[0], into)
    first = {p.relative_to(trees[0]) for p in trees[0].rglob("*") if p.is_file()}
    for tree in trees[1:]:
        files = {p.relative_to(tree) for p in tree.rglob("*") if p.is_file()}
        differ = sorted(str(p) for p in (first ^ files) if not is_binary(p))
        if differ:
            raise SystemExit(
                f"build_dist: {tree.name} has other files than {trees[0].name}: {differ}"
            )
        for relative in sorted(files):
            here, there = tree / relative, into / relative
            if not there.exists():
                there.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(here, there)
            elif not filecmp.cmp(here, there, shallow=False) and ".dist-info" not in str(relative):
                raise SystemExit(
                    f"build_dist: {relative} differs between {tree.name} and the first"
                )


def glibc_needed(trees: list[Path]) -> tuple[int, int] | None:
    """The newest glibc any installed wheel's platform tag asks for (None: all pure)."""
    needed: tuple[int, int] | None = None
    for wheel_file in (p for tree in trees for p in tree.glob("*.dist-info/WHEEL")):
        platforms = [
            line.split(":", 1)[1].strip().split("-")[-1]
            for line in wheel_file.read_text().splitlines()
            if line.startswith("Tag:")
        ]
        floors = [floor for floor in map(glibc_of, platforms) if floor is not None]
        if floors:  # a wheel with several tags runs where its oldest one does
            needed = min(floors) if needed is None else max(needed, min(floors))
    return needed


def glibc_of(platform_tag: str) -> tuple[int, int] | None:
    """The glibc a platform tag needs: manylinux_2_28_x86_64 -> (2, 28); any -> None; a plain
    linux_ tag (a wheel built here) needs this machine's."""
    if platform_tag == "any":
        return None
    found = re.match(r"manylinux_(\d+)_(\d+)_", platform_tag)
    if found:
        return int(found[1]), int(found[2])
    legacy = LEGACY_MANYLINUX.get(platform_tag.split("_", 1)[0])
    if legacy:
        return legacy
    here = platform.libc_ver()[1].split(".")
    return int(here[0]), int(here[1])


def add_guard(app: Path, glibc: tuple[int, int] | None) -> None:
    """Put the interpreter check in front of shiv's __main__.py (the archive is rewritten, with
    its entries' dates and modes kept: the build stays reproducible)."""
    guard = GUARD.format(pythons=PYTHONS, machine=platform.machine(), glibc=glibc)
    data = app.read_bytes()
    with zipfile.ZipFile(app) as old:
        shebang = data[: old.infolist()[0].header_offset]
        entries = [(info, old.read(info)) for info in old.infolist()]
    rewritten = app.with_suffix(".tmp")
    with rewritten.open("wb") as out:
        out.write(shebang)
        with zipfile.ZipFile(out, "w") as new:
            for info, content in entries:
                if info.filename == "__main__.py":
                    content = guard.encode() + b"\n" + content
                new.writestr(info, content)
    rewritten.chmod(app.stat().st_mode)
    os.replace(rewritten, app)


def build(out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="schedd-dist-") as scratch:
        work = Path(scratch)
        project, pins = resolve(work)
        trees = [install_for(minor, project, pins, work) for minor in PYTHONS]
        site_packages = work / "site-packages"
        merge(trees, site_packages)
        glibc = glibc_needed(trees)
        out.mkdir(parents=True, exist_ok=True)
        for app in APPS:
            target = out / f"{app}.pyz"
            run(
                *(sys.executable, "-m", "shiv", "--site-packages", str(site_packages)),
                *("--compressed", "--reproducible", "-c", app, "-o", str(target)),
            )
            add_guard(target, glibc)
    minors = ", ".join(f"{major}.{minor}" for major, minor in PYTHONS)
    floor = f", glibc {glibc[0]}.{glibc[1]} or newer" if glibc else ""
    sys.stdout.write(
        f"built {out}/schedd.pyz and {out}/schedctl.pyz for CPython {minors} "
        f"(any patch level) on Linux {platform.machine()}{floor}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where the files go")
    build(parser.parse_args().out)


if __name__ == "__main__":
    main()
