"""schedctl's global options work before and after the verb, on every command and subcommand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from schedd.cli.ctl.client import DEFAULT_URL, Client
from schedd.cli.ctl.main import cli
from schedd.cli.ctl.options import GLOBAL_OPTIONS, walk

ENV_VARS = ("URL", "TOKEN", "TENANT", "TIMEOUT", "CACERT")
NO_ENV: dict[str, str | None] = dict.fromkeys(f"SCHEDCTL_{name}" for name in ENV_VARS)
ANSWERS: dict[tuple[str, str], Any] = {
    ("GET", "/v1/jobs"): {"jobs": [], "next_cursor": None},
    ("POST", "/v1/tenants"): {"tenant_id": "tnt_1", "token": "sk_1", "signing_secret": "whsec_1"},
    ("GET", "/v1/cluster"): {
        "leader": "n1",
        "nodes": [
            {
                "node_id": "n1",
                "role": "leader",
                "api": "http://127.0.0.1:8701",
                "raft": "x:1",
                "healthy": True,
                "partitions": [0],
                "applied_index": 7,
            }
        ],
        "members": ["x:1"],
    },
    ("POST", "/v1/cluster/leader/step-down"): {"leader": "n2"},
}
COMMANDS = {
    "ls": ["ls"],
    "tenants create": ["tenants", "create", "acme"],
    "cluster step-down": ["cluster", "step-down"],
}


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The requests schedctl makes, with the settings of the Client that makes each one."""
    calls: list[dict[str, Any]] = []

    def request(self: Client, method: str, path: str, body: Any = None, **_: Any) -> Any:
        settings = ("url", "token", "tenant", "timeout_s", "cacert")
        calls.append({name: getattr(self, name) for name in settings} | {"path": path})
        return ANSWERS[method, path.partition("?")[0]]

    monkeypatch.setattr(Client, "request", request)
    return calls


def schedctl(*args: str, env: dict[str, str] | None = None) -> Result:
    result = CliRunner().invoke(cli, list(args), env=NO_ENV | (env or {}))
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize("verb", COMMANDS.values(), ids=COMMANDS.keys())
def test_the_options_work_after_the_verb(
    verb: list[str], sent: list[dict[str, Any]], tmp_path: Path
) -> None:
    cacert = tmp_path / "ca.pem"
    cacert.write_text("")
    given = ["--token", "T", "--tenant", "tnt_x", "--timeout", "2.5", "--cacert", str(cacert)]
    schedctl(*verb, "--json", "--url", "http://127.0.0.1:9", *given, "--debug")
    assert sent
    for call in sent:
        assert (call["token"], call["tenant"], call["timeout_s"]) == ("T", "tnt_x", 2.5)
        assert call["cacert"] == str(cacert)
    assert sent[0]["url"] == "http://127.0.0.1:9"


@pytest.mark.parametrize("verb", COMMANDS.values(), ids=COMMANDS.keys())
def test_the_options_still_work_before_the_verb(
    verb: list[str], sent: list[dict[str, Any]]
) -> None:
    schedctl("--url", "http://127.0.0.1:9", "--token", "T", "--timeout", "3", *verb, "--json")
    assert (sent[0]["url"], sent[0]["token"], sent[0]["timeout_s"]) == (
        "http://127.0.0.1:9",
        "T",
        3,
    )


def test_a_subcommand_group_takes_them_too(sent: list[dict[str, Any]]) -> None:
    schedctl("cluster", "--token", "T", "step-down", "--timeout", "4")
    assert {(call["token"], call["timeout_s"]) for call in sent} == {("T", 4)}


def test_after_the_verb_wins_over_before_which_wins_over_the_environment(
    sent: list[dict[str, Any]],
) -> None:
    env = {"SCHEDCTL_TOKEN": "E", "SCHEDCTL_URL": "http://127.0.0.1:7"}
    schedctl("--token", "B", "ls", "--token", "A", env=env)
    schedctl("--token", "B", "ls", env=env)
    schedctl("ls", "--token", "A", env=env)
    schedctl("ls", env=env)
    schedctl("ls", env={})
    assert [call["token"] for call in sent] == ["A", "B", "A", "E", None]
    assert [call["url"] for call in sent] == [*["http://127.0.0.1:7"] * 4, DEFAULT_URL]


def test_an_environment_variable_named_after_the_command_is_not_read(
    sent: list[dict[str, Any]],
) -> None:
    schedctl("ls", env={"SCHEDCTL_TOKEN": "E", "SCHEDCTL_LS_TOKEN": "L"})
    assert sent[0]["token"] == "E"


def test_a_bad_value_after_the_verb_is_a_usage_error(sent: list[dict[str, Any]]) -> None:
    result = CliRunner().invoke(cli, ["ls", "--timeout", "0"], env=NO_ENV)
    assert result.exit_code == 2 and "--timeout" in result.output
    assert not sent


def every_command() -> list[tuple[str, click.Command]]:
    commands: list[tuple[str, click.Command]] = []

    def visit(prefix: str, group: click.Group) -> None:
        for name, command in group.commands.items():
            commands.append((f"{prefix}{name}", command))
            if isinstance(command, click.Group):
                visit(f"{prefix}{name} ", command)

    visit("", cli)
    return commands


@pytest.mark.parametrize(("name", "command"), every_command(), ids=lambda v: str(v))
def test_every_command_lists_them_in_its_help(name: str, command: click.Command) -> None:
    text = CliRunner().invoke(cli, [*name.split(), "--help"], env=NO_ENV).output
    own = {"work": {"--timeout"}}.get(name, set())  # work's --timeout limits its commands
    for option in GLOBAL_OPTIONS:
        if option.flag not in own:
            assert f"  {option.flag} " in text, (name, option.flag)


def test_the_walk_covers_subcommands() -> None:
    names = {command.name for command in walk(cli)}
    assert {"create", "step-down", "redrive", "ls", "next", "completion"} <= names
