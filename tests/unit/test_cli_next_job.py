"""`schedctl next JOB_ID` (issue 31, section 7): an existing job's next runs, its stored
schedule (zone, start and end included) previewed through the API's preview endpoint, in the
same table as an expression's, with the node's local times and notes (issue 33; a node's answer
without them shows UTC only); a job that does not exist is the usual 404 and exit 1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.servers import serving
from tests.unit.test_cli_answers import JOB, STAMP, schedctl

JOB_ID = "job_0123abcd"
BERLIN = {
    "cron": "30 2 * * *",
    "timezone": "Europe/Berlin",
    "start_at": "2027-03-01T00:00:00Z",
    "end_at": "2027-04-01T00:00:00Z",
}
PREVIEW = {
    "runs": ["2027-03-27T01:30:00Z", "2027-03-28T01:00:00Z"],
    "occurrences": [
        {
            "at": "2027-03-27T01:30:00Z",
            "local": "2027-03-27T02:30:00+01:00",
            "zone": "Europe/Berlin",
            "abbreviation": "CET",
            "note": None,
        },
        {
            "at": "2027-03-28T01:00:00Z",
            "local": "2027-03-28T03:00:00+02:00",
            "zone": "Europe/Berlin",
            "abbreviation": "CEST",
            "note": "02:30 does not exist on 28 March: runs at 03:00",
        },
    ],
}
NOT_FOUND = {"error": {"code": "job_not_found", "message": "no job with id 'job_ffff'"}}


class Node:
    """What the fake node answers, and the requests it was sent."""

    def __init__(self) -> None:
        self.job: dict[str, Any] = JOB | {"job_id": JOB_ID, "schedule": BERLIN}
        self.preview: dict[str, Any] = PREVIEW
        self.sent: list[tuple[str, str, Any]] = []

    def handler(self) -> type[BaseHTTPRequestHandler]:
        node = self

        class Scripted(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                node.sent.append(("GET", self.path, None))
                if self.path == f"/v1/jobs/{JOB_ID}":
                    self._send(200, node.job)
                else:
                    self._send(404, NOT_FOUND)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                node.sent.append(("POST", self.path, body))
                self._send(200, node.preview)

            def _send(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: object) -> None:
                pass

        return Scripted


@pytest.fixture
def node() -> Node:
    return Node()


@pytest.fixture
def url(node: Node) -> Iterator[str]:
    with serving(node.handler()) as served:
        yield served


def test_next_of_a_job_previews_its_stored_schedule_in_its_zone(
    node: Node, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = schedctl(url, "next", JOB_ID, "-n", "2", capsys=capsys)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "#   local (Europe/Berlin)               UTC                    note",
        "1   Sat 2027-03-27 02:30 CET (+0100)    2027-03-27T01:30:00Z",
        "2   Sun 2027-03-28 03:00 CEST (+0200)   2027-03-28T01:00:00Z   02:30 does not exist"
        " on 28 March: runs at 03:00",
    ]
    assert node.sent == [
        ("GET", f"/v1/jobs/{JOB_ID}", None),
        ("POST", "/v1/schedules:preview", {"schedule": BERLIN, "count": 2}),
    ]


def test_next_of_a_job_json_is_the_preview_answer_and_after_is_passed_on(
    node: Node, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    after = "2027-03-27T00:00:00Z"
    code, out, _ = schedctl(url, "next", JOB_ID, "--after", after, "--json", capsys=capsys)
    assert code == 0 and json.loads(out) == PREVIEW
    assert node.sent[-1] == (
        "POST",
        "/v1/schedules:preview",
        {"schedule": BERLIN, "count": 5, "after": after},
    )


def test_next_of_an_every_job_shows_utc_and_a_paused_job_says_so(
    node: Node, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    node.job |= {"schedule": {"every": "5m", "start_at": STAMP}, "status": "paused"}
    node.preview = {"runs": ["2026-12-01T08:05:00Z"]}
    code, out, err = schedctl(url, "next", JOB_ID, capsys=capsys)
    assert code == 0
    assert out.splitlines() == ["#   UTC", "1   2026-12-01T08:05:00Z"]
    assert f"{JOB_ID} is paused: it fires none of these runs while it is" in err


def test_next_of_a_job_whose_schedule_has_ended_says_so(
    node: Node, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    node.preview = {"runs": []}
    code, out, _ = schedctl(url, "next", JOB_ID, capsys=capsys)
    assert (code, out) == (0, "no runs left: the schedule has ended\n")


def test_next_of_an_unknown_job_is_a_404_and_exit_1(
    node: Node, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = schedctl(url, "next", "job_ffff", capsys=capsys)
    assert (code, out) == (1, "")
    assert err.strip() == "error: no job with id 'job_ffff'"
    assert [method for method, *_ in node.sent] == ["GET"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--tz", "Asia/Tokyo"), "--tz: does not go with JOB_ID"),
        (("--start", STAMP), "--start: does not go with JOB_ID"),
        (("--every", "5m"), "exactly one of EXPR, JOB_ID, --every or --at"),
        (("--after", "2027-03-27T00:00:00"), "after:"),
    ],
)
def test_next_of_a_job_with_a_schedule_flag_exits_2_before_any_request(
    args: tuple[str, ...],
    expected: str,
    node: Node,
    url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = schedctl(url, "next", JOB_ID, *args, capsys=capsys)
    assert (code, out, node.sent) == (2, "", [])
    assert expected in err
