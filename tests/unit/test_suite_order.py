"""The suite's own ordering (tests/conftest.py): a file renamed or moved would otherwise lose its
place at the front without any test failing."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST_FILES

ROOT = Path(__file__).parents[2]


def test_every_file_named_longest_exists_once() -> None:
    missing = [path for path in LONGEST_FILES if not (ROOT / path).is_file()]
    assert missing == []
    assert len(set(LONGEST_FILES)) == len(LONGEST_FILES)
