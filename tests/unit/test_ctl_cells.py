"""schedctl across cells (issue 35): a node of another cell answers 307 wrong_cell, and schedctl
sends the same request (method, body, token) to the owner's URLs from the answer's body, the
next one on a connection error; a loop between cells is a clear error (exit 3), and a 3xx that
is not a wrong_cell answer is never followed. Scripted nodes stand for both cells."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from tests.cells import Answer, ScriptedNode, Seen, scripted_nodes, wrong_cell
from tests.ports import free_ports
from tests.schedctl_inprocess import run_schedctl
from tests.unit.test_cli_tables import JOB

TOKEN = "tok_cells_0123456789"
JOB_ID = str(JOB["job_id"])


@pytest.fixture
def nodes() -> Iterator[list[ScriptedNode]]:
    with scripted_nodes(3) as nodes:
        yield nodes


def schedctl(url: str, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "SCHEDCTL_URL": url, "SCHEDCTL_TOKEN": TOKEN}
    env.pop("SCHEDCTL_TENANT", None)
    result = run_schedctl(args, env=env)
    return result.returncode, result.stdout, result.stderr


def owner(request: Seen) -> Answer:
    """A node of the cell that owns every job."""
    if request.method == "DELETE":
        return Answer(204)
    return Answer(201 if request.method == "POST" else 200, JOB)


def test_get_add_and_cancel_follow_wrong_cell_with_method_body_and_token(
    nodes: list[ScriptedNode],
) -> None:
    first, c2, _ = nodes
    dead = f"http://127.0.0.1:{free_ports(1)[0]}"  # the owner's first URL is down
    first.script = lambda request: wrong_cell("c2", [dead, c2.url], request)
    c2.script = owner

    assert schedctl(first.url, "get", JOB_ID, "--json")[0] == 0
    code, out, err = schedctl(first.url, "add", "--in", "10m", "--queue", "digests", "--json")
    assert code == 0, err
    assert json.loads(out)["job_id"] == JOB_ID
    assert schedctl(first.url, "cancel", JOB_ID)[0] == 0

    bearer = f"Bearer {TOKEN}"
    asked = [(seen.method, seen.path.split("?")[0], seen.authorization) for seen in first.seen]
    served = [(seen.method, seen.path.split("?")[0], seen.authorization) for seen in c2.seen]
    expected = [
        ("GET", f"/v1/jobs/{JOB_ID}", bearer),
        ("POST", "/v1/jobs", bearer),
        ("DELETE", f"/v1/jobs/{JOB_ID}", bearer),
    ]
    assert asked == served == expected
    assert c2.seen[1].body == first.seen[1].body
    assert c2.seen[1].body["target"] == {"type": "queue", "name": "digests"}


def test_a_redirect_loop_between_cells_fails_naming_the_cells(nodes: list[ScriptedNode]) -> None:
    c1, c2, _ = nodes
    c1.script = lambda request: wrong_cell("c2", [c2.url], request)
    c2.script = lambda request: wrong_cell("c1", [c1.url], request)

    code, out, err = schedctl(c1.url, "pause", JOB_ID)

    assert code == 3 and out == ""
    assert "loop (c2 -> c1 -> c2)" in err and "nothing was done" in err
    assert len(c1.seen) == 2 and len(c2.seen) == 1


def test_a_redirect_that_is_not_wrong_cell_is_not_followed(nodes: list[ScriptedNode]) -> None:
    node, elsewhere, _ = nodes
    elsewhere.script = owner
    node.script = lambda request: Answer(307, None, {"Location": elsewhere.url + request.path})

    code, _, err = schedctl(node.url, "get", JOB_ID)

    assert code == 1
    assert f"answered HTTP 307 (a redirect to {elsewhere.url}" in err
    assert elsewhere.seen == []


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:21", "file:///etc/passwd", "http://x/path"])
def test_a_wrong_cell_url_that_is_not_a_node_url_is_not_followed(
    nodes: list[ScriptedNode], url: str
) -> None:
    node, _, _ = nodes
    node.script = lambda request: wrong_cell("c2", [url], request)

    code, _, err = schedctl(node.url, "trigger", JOB_ID)

    assert code == 3
    assert "to cell c2 without a usable http(s) URL" in err and "nothing was done" in err
