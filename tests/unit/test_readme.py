"""The README shows real `--help` output: fail when the CLI's help drifts from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
SCHEDCTL = str(Path(sys.executable).with_name("schedctl"))


def help_text(*args: str) -> str:
    result = subprocess.run(
        [SCHEDCTL, *args, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"},
    )
    return result.stdout.strip()


def test_readme_shows_current_next_help() -> None:
    assert help_text("next") in README.read_text()


def test_readme_shows_current_add_help() -> None:
    assert help_text("add") in README.read_text()


def test_readme_keeps_the_two_quick_start_commands() -> None:
    text = README.read_text()
    assert "make run" in text
    assert "make test" in text
