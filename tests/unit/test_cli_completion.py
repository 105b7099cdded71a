"""`schedctl completion`: the scripts, and the completions they ask for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCHEDCTL = str(Path(sys.executable).with_name("schedctl"))


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_shell_gets_a_script_calling_back_into_schedctl(shell: str) -> None:
    result = subprocess.run(
        [SCHEDCTL, "completion", shell], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert "_SCHEDCTL_COMPLETE" in result.stdout and "schedctl" in result.stdout


def test_the_script_completes_commands_and_options() -> None:
    env = os.environ | {"_SCHEDCTL_COMPLETE": "bash_complete", "COMP_CWORD": "1"}
    words = subprocess.run(
        [SCHEDCTL], env=env | {"COMP_WORDS": "schedctl imp"}, capture_output=True, text=True
    ).stdout
    assert "plain,import-crontab" in words.splitlines()
    options = subprocess.run(
        [SCHEDCTL],
        env=env | {"COMP_WORDS": "schedctl work q --sh", "COMP_CWORD": "3"},
        capture_output=True,
        text=True,
    ).stdout
    assert "plain,--shell" in options.splitlines()


def test_an_unknown_shell_is_a_usage_error() -> None:
    result = subprocess.run([SCHEDCTL, "completion", "tcsh"], capture_output=True, text=True)
    assert result.returncode == 2 and "tcsh" in result.stderr
