"""`schedctl connections add|ls|rm|test` and the broker target flags of `schedctl add`, against
a real node (loopback opened by allow_cidrs); schedctl's entry point runs in the test process
(tests/schedctl_inprocess.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_schedctl import Ctl, assert_fails
from tests.servers import ADMIN_TOKEN, NodeProcess, make_nodes, running

SECRET = "cli-s3cret-pw"
URL = f"redis://sender:{SECRET}@127.0.0.1:6391/0"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    base: Path = tmp_path_factory.mktemp("ctl-connections")
    extra = '[delivery]\nallow_cidrs = ["127.0.0.0/8"]\n'
    with running(make_nodes(base, 1, extra_sections=extra)) as nodes:
        yield nodes[0]


@pytest.fixture
def ctl(node: NodeProcess) -> Ctl:
    return Ctl(node.url, ADMIN_TOKEN).new_tenant()


def test_add_ls_rm_with_the_url_from_an_argument_stdin_or_the_environment(ctl: Ctl) -> None:
    created = ctl.json("connections", "add", "r", URL)
    assert created["name"] == "r" and created["kind"] == "redis"
    assert created["host"] == "127.0.0.1:6391"
    piped = ctl("connections", "add", "mq", "-", stdin=f"amqp://u:{SECRET}@127.0.0.1\n")
    assert piped.returncode == 0, piped.stderr
    assert SECRET not in piped.stdout + piped.stderr
    from_env = ctl("connections", "add", "n", env={"SCHEDCTL_CONNECTION_URL": "nats://127.0.0.1"})
    assert from_env.returncode == 0, from_env.stderr
    listed = ctl.json("connections", "ls")
    assert [(c["name"], c["kind"]) for c in listed["connections"]] == [
        ("mq", "rabbitmq"),
        ("n", "nats"),
        ("r", "redis"),
    ]
    table = ctl("connections", "ls")
    assert table.returncode == 0 and "127.0.0.1:6391" in table.stdout
    assert SECRET not in table.stdout
    assert ctl.json("connections", "rm", "n") == {"name": "n", "status": "deleted"}
    assert_fails(ctl("connections", "rm", "n"), 1, "no connection named 'n'")


def test_a_missing_or_bad_url_exits_2_without_echoing_it(ctl: Ctl) -> None:
    assert_fails(ctl("connections", "add", "r"), 2, "SCHEDCTL_CONNECTION_URL")
    assert_fails(ctl("connections", "add", "r", "-", stdin=""), 2, "URL")
    bad = ctl("connections", "add", "r", f"http://u:{SECRET}@127.0.0.1")
    assert_fails(bad, 2, "url: must start with one of redis://")
    assert SECRET not in bad.stderr
    blocked = ctl("connections", "add", "r", f"redis://u:{SECRET}@10.0.0.9")
    assert_fails(blocked, 2, "not allowed: private", "[delivery] allow_cidrs")  # input: 2
    assert SECRET not in blocked.stderr


@pytest.mark.slow
def test_add_with_broker_targets_and_rm_while_used(ctl: Ctl) -> None:
    ctl.json("connections", "add", "r", URL)
    ctl.json("connections", "add", "mq", f"amqp://u:{SECRET}@127.0.0.1")
    ctl.json("connections", "add", "n", "nats://127.0.0.1")
    stream = ctl.json("add", "--in", "1h", "--redis-stream", "r/digests/weekly", "--maxlen", "500")
    assert stream["target"] == {
        "type": "redis_stream",
        "connection": "r",
        "stream": "digests/weekly",
        "maxlen": 500,
    }
    rabbit = ctl.json("add", "--in", "1h", "--rabbitmq", "mq//digests")
    assert rabbit["target"] == {
        "type": "rabbitmq",
        "connection": "mq",
        "exchange": "",
        "routing_key": "digests",
    }
    topic = ctl.json("add", "--in", "1h", "--rabbitmq", "mq/amq.topic/a/b")
    assert topic["target"]["exchange"] == "amq.topic" and topic["target"]["routing_key"] == "a/b"
    nats = ctl.json("add", "--in", "1h", "--nats", "n/digests.weekly")
    assert nats["target"] == {"type": "nats", "connection": "n", "subject": "digests.weekly"}
    shown = ctl("get", nats["job_id"])
    assert shown.returncode == 0 and "nats n digests.weekly" in shown.stdout
    assert_fails(ctl("connections", "rm", "n"), 1, "used by live jobs", nats["job_id"])
    assert ctl("cancel", nats["job_id"]).returncode == 0
    assert ctl("connections", "rm", "n").returncode == 0


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--redis-stream", "r"), "--redis-stream: must be CONN/STREAM"),
        (("--rabbitmq", "mq/x"), "--rabbitmq: must be CONN/EXCHANGE/KEY"),
        (("--nats", "n/a.*"), "--nats: must be dot-separated"),
        (("--nats", "bad name/a"), "CONN: must name a connection"),
        (("--queue", "q", "--nats", "n/a"), "give exactly one of --queue, --http, --redis"),
        (("--queue", "q", "--maxlen", "5"), "--maxlen: applies to --redis-stream only"),
        (("--redis-stream", "r/s", "--maxlen", "0"), "0 is not in the range"),
    ],
)
def test_bad_broker_flags_exit_2_before_any_request(
    ctl: Ctl, args: tuple[str, ...], fragment: str
) -> None:
    result = ctl("add", "--in", "1h", *args, url="http://127.0.0.1:9")  # nothing listens there
    assert result.returncode == 2, result.stderr
    assert fragment in result.stderr


def test_a_job_naming_a_missing_connection_is_refused_by_the_node(ctl: Ctl) -> None:
    result = ctl("add", "--in", "1h", "--nats", "nope/a.b")
    assert_fails(result, 2, "target.connection: no connection named 'nope'")


def test_test_reports_a_broker_it_cannot_reach_without_the_url(ctl: Ctl) -> None:
    ctl.json("connections", "add", "r", URL)
    result = ctl("connections", "test", "r")  # nothing listens on port 6391
    assert_fails(result, 1, "connection 'r' failed: connect to 127.0.0.1 failed")
    assert SECRET not in result.stderr and "sender" not in result.stderr
    assert_fails(ctl("connections", "test", "missing"), 1, "no connection named 'missing'")


def test_the_help_says_how_to_keep_the_url_out_of_the_history(ctl: Ctl) -> None:
    text = " ".join(ctl("connections", "add", "--help").stdout.split())
    assert "give - to read it from stdin" in text
    assert "SCHEDCTL_CONNECTION_URL" in text
    assert json.loads(ctl("connections", "ls", "--json").stdout) == {"connections": []}
