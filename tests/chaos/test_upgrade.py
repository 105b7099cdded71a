"""The rolling upgrade of a chaos round (`python -m tests.chaos --upgrade-from REV`): its plan,
the old release's code as git holds it, and the rule that counts a failed upgrade."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.chaos.cluster import freeze_release
from tests.chaos.history import FaultEvent, History
from tests.chaos.nemesis import plan_faults, plan_upgrades
from tests.chaos.runner import _failed_upgrades


def test_each_node_is_upgraded_once_in_turn_while_faults_go_on() -> None:
    upgrades = plan_upgrades(120.0, ["n1", "n2", "n3"])
    assert [(u.kind, u.role) for u in upgrades] == [("upgrade", f"n{i}") for i in (1, 2, 3)]
    times = [u.at_s for u in upgrades]
    assert times == sorted(times) and times[0] == 30.0 and times[-1] < 120.0 - 15.0
    faults = plan_faults(2370, 120.0, ("kill", "pause"))
    assert any(f.at_s > times[-1] for f in faults)  # faults before, between and after


def test_the_old_release_is_the_package_as_git_holds_it(tmp_path: Path) -> None:
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    folder = freeze_release(tmp_path, head)
    held = subprocess.run(
        ["git", "show", f"{head}:schedd/__init__.py"], capture_output=True, check=True
    ).stdout
    assert (folder / "schedd" / "__init__.py").read_bytes() == held
    assert (folder / "schedd" / "cli" / "daemon.py").exists()


def test_an_upgrade_that_found_its_node_down_or_failing_is_a_violation() -> None:
    history = History()
    facts = [
        {"was_running": True, "exit_code": 0},  # a clean stop: fine
        {"was_running": False, "exit_code": None},  # the old code had halted or crashed
        {"was_running": True, "exit_code": 70},  # it stopped with an error
    ]
    for i, fact in enumerate(facts, start=1):
        event = history.fault(FaultEvent("upgrade", f"n{i}", "follower", 0))
        event.facts |= fact
    history.fault(FaultEvent("kill", "n1", "leader", 0))  # other faults are not upgrades
    assert [v.detail.split(":")[0] for v in _failed_upgrades(history)] == ["n2", "n3"]
