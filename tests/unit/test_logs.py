"""The node's log formats: human lines or one JSON object per line."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from schedd.config import load_config
from schedd.errors import ConfigError
from schedd.logs import JsonFormatter


def record(message: str, *args: object, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("boom")
        except ValueError:
            exc_info = sys.exc_info()
    return logging.LogRecord("schedd.node", logging.WARNING, __file__, 1, message, args, exc_info)


def test_a_json_line_per_record_with_time_level_logger_and_message() -> None:
    line = JsonFormatter().format(record('ready node=%s \u00e9 "q"\nnext', "n1"))
    assert "\n" not in line  # one record, one line, whatever the message holds
    entry = json.loads(line)
    assert set(entry) == {"ts", "level", "logger", "message"}
    assert entry["level"] == "warning" and entry["logger"] == "schedd.node"
    assert entry["message"] == 'ready node=n1 \u00e9 "q"\nnext'
    assert entry["ts"].endswith("Z") and len(entry["ts"]) == len("2026-11-30T11:30:51.123Z")


def test_exceptions_are_kept_in_the_object() -> None:
    entry = json.loads(JsonFormatter().format(record("failed", exc=True)))
    assert "ValueError: boom" in entry["exception"]


def test_the_format_comes_from_the_config(tmp_path: Path) -> None:
    base = '[node]\nid = "n1"\ndata_dir = "d"\n'
    path = tmp_path / "n.toml"
    path.write_text(base)
    assert load_config(path, env={}).log_format == "text"
    path.write_text(base + '[log]\nformat = "json"\n')
    assert load_config(path, env={}).log_format == "json"
    path.write_text(base + '[log]\nformat = "xml"\n')
    with pytest.raises(ConfigError, match=r"log\.format must be one of text, json, got 'xml'"):
        load_config(path, env={})
