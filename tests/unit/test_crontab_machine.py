"""A machine's crontabs as Debian's cron finds them (schedd/cli/ctl/crontab_machine.py), on
tests/fixtures/debian-machine: a copy of a Debian system's /etc/crontab, /etc/cron.d and spool,
with a stand-in `crontab` in its usr/bin."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from schedd.cli.ctl.crontab_file import RunParts, parse_crontab
from schedd.cli.ctl.crontab_machine import (
    Reading,
    expand_run_parts,
    machine_crontabs,
    machine_zone,
    read_crontabs,
)
from schedd.errors import InvalidRequest
from tests.debian_machine import copy_machine


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_machine(tmp_path_factory.mktemp("machine") / "root")


@pytest.fixture
def fake_crontab(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{machine / 'usr' / 'bin'}:{os.environ['PATH']}")


def test_the_files_cron_reads_in_its_order(machine: Path) -> None:
    found = machine_crontabs(machine, has_users=False)
    assert [(s.name, s.is_system, s.user) for s in found.sources] == [
        ("/etc/crontab", True, None),
        ("/etc/cron.d/anacron", True, None),
        ("/etc/cron.d/e2scrub_all", True, None),
        ("/etc/cron.d/pg-backup", True, None),
    ]
    [ignored] = found.warnings  # .placeholder is passed over without a word, as cron does
    assert ignored.file == "/etc/cron.d/pg-backup.dpkg-old" and "A-Z a-z 0-9 _ -" in ignored.text
    assert found.skipped == []


def test_users_crontabs_come_from_crontab_l(machine: Path, fake_crontab: None) -> None:
    found = machine_crontabs(machine, has_users=True)
    users = [s for s in found.sources if not s.is_system]
    assert [(s.name, s.user) for s in users] == [
        ("crontab -l -u alice", "alice"),
        ("crontab -l -u root", "root"),
    ]
    assert users[0].text == (machine / "var/spool/cron/crontabs/alice").read_text()


def test_a_user_crontab_that_cannot_be_listed_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = tmp_path / "var/spool/cron/crontabs"
    spool.mkdir(parents=True)
    (spool / "ghost").write_text("0 * * * * boo\n")
    (tmp_path / "usr/bin").mkdir(parents=True)
    lister = tmp_path / "usr/bin/crontab"
    lister.write_text("#!/bin/sh\necho \"crontab: user '$3' unknown\" >&2\nexit 1\n")
    lister.chmod(0o755)
    monkeypatch.setenv("PATH", f"{lister.parent}:{os.environ['PATH']}")
    found = machine_crontabs(tmp_path, has_users=True)
    [skipped] = found.skipped
    assert skipped.file == "crontab -l -u ghost" and skipped.reason.startswith("exit 1: crontab:")
    assert found.sources == []
    missing = machine_crontabs(tmp_path / "nothing", has_users=True)
    assert missing.skipped == [] and "no user crontabs" in missing.warnings[0].text


def test_the_machine_zone(machine: Path) -> None:
    assert machine_zone(machine) == "Europe/Berlin"


def test_the_zone_from_the_localtime_link(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    assert machine_zone(tmp_path) is None
    (tmp_path / "etc/localtime").symlink_to("/usr/share/zoneinfo/America/Chicago")
    assert machine_zone(tmp_path) == "America/Chicago"


def test_run_parts_expands_to_the_scripts_it_would_run(machine: Path) -> None:
    text = (machine / "etc/crontab").read_text()
    crontab = parse_crontab(text, timezone="UTC", file="/etc/crontab", is_system=True)
    daily = crontab.entries[1]
    call = RunParts(directory="/etc/cron.daily", cd="/", options=("--report",))
    scripts, notes = expand_run_parts(daily, call, machine)
    assert [s.command for s in scripts] == [
        "cd / && /etc/cron.daily/dpkg",
        "cd / && /etc/cron.daily/logrotate",
        "cd / && /etc/cron.daily/man-db",
    ]
    assert {(s.line, s.user, s.is_anacron) for s in scripts} == {(20, "root", True)}
    [note] = notes
    assert note.text == (
        "run-parts passes over /etc/cron.daily/: cleanup.sh (its name), disabled (not executable)"
    )
    hourly = RunParts(directory="/etc/cron.hourly", cd=None, options=())
    nothing, [empty] = expand_run_parts(crontab.entries[0], hourly, machine)
    assert nothing == [] and "no script" in empty.text


def test_lsbsysinit_names(tmp_path: Path) -> None:
    directory = tmp_path / "etc/cron.daily"
    directory.mkdir(parents=True)
    for name in ("example.org-backup", "50-local.sh", "a.b", "Upper", "old.dpkg-old", "plain"):
        (directory / name).write_text("#!/bin/sh\n")
        (directory / name).chmod(0o755)
    [line] = parse_crontab("0 0 * * * root x\n", timezone="UTC", is_system=True).entries
    lsb = RunParts(directory="/etc/cron.daily", cd=None, options=("--lsbsysinit",))
    scripts, _ = expand_run_parts(line, lsb, tmp_path)
    assert [s.command for s in scripts] == [  # LSB's hierarchical names; a suffix: no
        "/etc/cron.daily/Upper",
        "/etc/cron.daily/example.org-backup",
        "/etc/cron.daily/plain",
    ]
    plain = RunParts(directory="/etc/cron.daily", cd=None, options=())
    scripts, _ = expand_run_parts(line, plain, tmp_path)
    assert [s.command for s in scripts] == ["/etc/cron.daily/Upper", "/etc/cron.daily/plain"]


def reading(source: object, **options: object) -> Reading:
    base: dict[str, object] = {
        "source": source,
        "is_machine": False,
        "has_users": False,
        "is_system": None,
        "user": None,
        "timezone": None,
        "root": Path("/nonexistent"),
        "mailto_alerts": None,
        "is_expanding": False,
    }
    return Reading(**(base | options))  # type: ignore[arg-type]


def named(name: str, text: str) -> io.StringIO:
    stream = io.StringIO(text)
    stream.name = name  # type: ignore[misc]
    return stream


def test_files_under_etc_are_read_in_the_system_format() -> None:
    line = "10 3 * * * root /sbin/e2scrub_all -A -r\n"
    for name, user in (
        ("/etc/cron.d/e2scrub_all", "root"),
        ("/etc/crontab", "root"),
        ("/home/alice/crontab", None),
    ):
        [entry] = read_crontabs(reading(named(name, line))).entries
        assert (entry.file, entry.user, entry.timezone) == (name, user, "UTC")
    [forced] = read_crontabs(reading(named("/tmp/x", line), is_system=True)).entries
    assert forced.user == "root" and forced.command == "/sbin/e2scrub_all -A -r"
    [stdin] = read_crontabs(reading(io.StringIO(line), user="bob")).entries
    assert (stdin.file, stdin.user, stdin.command) == ("-", "bob", "root /sbin/e2scrub_all -A -r")
    with pytest.raises(InvalidRequest, match=r"--user: /etc/cron\.d/x is a system crontab"):
        read_crontabs(reading(named("/etc/cron.d/x", line), user="bob"))
    no_system = reading(named("/etc/crontab", line), user="bob", is_system=False)
    [as_user] = read_crontabs(no_system).entries
    assert as_user.user == "bob"


def test_the_machine_is_read_in_its_zone_unless_told(machine: Path, fake_crontab: None) -> None:
    crontab = read_crontabs(reading(None, is_machine=True, has_users=True, root=machine))
    assert crontab.files[:2] == ["/etc/crontab", "/etc/cron.d/anacron"]
    assert {e.timezone for e in crontab.entries if e.file != "crontab -l -u alice"} == {
        "Europe/Berlin"
    }
    told = read_crontabs(reading(None, is_machine=True, timezone="Asia/Tokyo", root=machine))
    assert {e.timezone for e in told.entries} == {"Asia/Tokyo"}


def test_system_crontabs_cron_would_refuse_are_passed_over(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc/cron.d").mkdir(parents=True)
    (root / "elsewhere").mkdir()
    line = "0 * * * * root true\n"
    for name, uid, mode in (
        ("etc/crontab", 65534, 0o644),  # not root's
        ("etc/cron.d/good", 0, 0o644),
        ("etc/cron.d/group-writable", 0, 0o664),
        ("etc/cron.d/world-writable", 0, 0o646),
        ("elsewhere/bad-target", 65534, 0o644),
        ("elsewhere/good-target", 0, 0o600),
    ):
        (root / name).write_text(line)
        os.chown(root / name, uid, 0)
        (root / name).chmod(mode)
    (root / "etc/cron.d/link-to-bad").symlink_to(root / "elsewhere/bad-target")
    (root / "etc/cron.d/link-to-good").symlink_to(root / "elsewhere/good-target")
    os.chown(root / "etc/cron.d/link-to-good", 65534, 0, follow_symlinks=False)  # the link's own
    found = machine_crontabs(root, has_users=False)
    assert [s.name for s in found.sources] == ["/etc/cron.d/good", "/etc/cron.d/link-to-good"]
    assert found.skipped == []  # warnings, not errors: cron passes them over too
    assert [(n.file, n.text) for n in found.warnings] == [
        ("/etc/crontab", "not read: owned by uid 65534: cron reads only root's (chown root)"),
        (
            "/etc/cron.d/group-writable",
            "not read: mode 0664: cron reads none its group or others may write (chmod go-w)",
        ),
        (
            "/etc/cron.d/link-to-bad",
            "not read: owned by uid 65534: cron reads only root's (chown root)",
        ),
        (
            "/etc/cron.d/world-writable",
            "not read: mode 0646: cron reads none its group or others may write (chmod go-w)",
        ),
    ]
    crontab = read_crontabs(reading(None, is_machine=True, root=root, timezone="UTC"))
    assert [e.file for e in crontab.entries] == ["/etc/cron.d/good", "/etc/cron.d/link-to-good"]
    assert not crontab.has_errors


def test_without_anacron_cron_runs_the_guarded_lines_itself(tmp_path: Path) -> None:
    root = copy_machine(tmp_path / "root")
    installed = read_crontabs(reading(None, is_machine=True, root=root))
    (root / "usr/sbin/anacron").unlink()
    bare = read_crontabs(reading(None, is_machine=True, root=root))
    for crontab, is_anacron in ((installed, True), (bare, False)):
        daily = next(e for e in crontab.entries if (e.file, e.line) == ("/etc/crontab", 20))
        assert daily.command == "{ cd / && run-parts --report /etc/cron.daily; }"
        assert daily.is_anacron is is_anacron
    [note] = [n for n in bare.warnings if (n.file, n.line) == ("/etc/crontab", 20)]
    assert note.text == (
        "no /usr/sbin/anacron on this machine: cron runs this line itself; imported without "
        "its `test -x /usr/sbin/anacron ||`, with cron's misfire_policy skip"
    )
    guarded = named("/tmp/x", "0 0 * * * test -x /usr/sbin/anacron || y\n")
    [file] = read_crontabs(reading(guarded)).entries
    assert file.is_anacron  # FILE: its machine's anacron is not known, it is taken as there
