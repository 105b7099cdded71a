"""One real `schedd serve` node (single-node cluster) shared by a module's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import NodeProcess, make_nodes, running


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    base: Path = tmp_path_factory.mktemp("node")
    with running(make_nodes(base, 1)) as nodes:
        yield nodes[0]
