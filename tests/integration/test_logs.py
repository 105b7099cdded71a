"""A node started with `[log] format = "json"` writes one JSON object per line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.servers import make_nodes, running, wait_for


def test_a_json_logging_node_writes_only_json_lines(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    base: Path = tmp_path_factory.mktemp("jsonlog")
    with running(make_nodes(base, 1, extra_sections='[log]\nformat = "json"\n')) as nodes:
        node = nodes[0]
        # /readyz can answer a moment before the node logs its own `ready` line.
        wait_for(lambda: "ready node=n1" in node.log_path.read_text() or None, 10, "ready")
    lines = [line for line in node.log_path.read_text().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line, or this fails
    messages = [entry["message"] for entry in entries]
    assert any(m.startswith("ready node=n1 ") for m in messages), messages
    assert any(m.startswith("stopped node=n1") for m in messages), messages
    assert all(
        entry["level"] in ("debug", "info", "warning", "error", "critical") for entry in entries
    )
