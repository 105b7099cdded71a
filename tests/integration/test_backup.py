"""`schedd backup` while a node serves, and `schedd restore` to start a cluster over from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.api_helpers import new_tenant
from tests.servers import http, make_nodes, running

SCHEDD = str(Path(sys.executable).with_name("schedd"))


def schedd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCHEDD, *args], capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_a_backup_taken_while_serving_restores_into_a_new_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    old_base: Path = tmp_path_factory.mktemp("old")
    out = old_base / "backup.db"
    body = {
        "schedule": {"delay": "1h"},
        "target": {"type": "queue", "name": "q"},
        "payload": {"keep": "me"},
    }
    with running(make_nodes(old_base, 1)) as [old]:
        tenant = new_tenant(old)
        status, job, _ = http("POST", f"{old.url}/v1/jobs", body, token=tenant.token)
        assert status == 201
        taken = schedd("backup", "--config", str(old.config_path), str(out))
        assert taken.returncode == 0, taken.stderr
        assert "jobs=1" in taken.stdout and out.exists()
        # Serving goes on while and after the copy is made.
        status, _, _ = http("POST", f"{old.url}/v1/jobs", body, token=tenant.token)
        assert status == 201

    new_base: Path = tmp_path_factory.mktemp("new")
    [fresh] = make_nodes(new_base, 1)
    restored = schedd("restore", "--config", str(fresh.config_path), str(out), "--yes")
    assert restored.returncode == 0, restored.stderr
    assert "jobs=1" in restored.stdout
    with running([fresh]):
        status, again, _ = http("GET", f"{fresh.url}/v1/jobs/{job['job_id']}", token=tenant.token)
        assert status == 200 and again["payload"] == {"keep": "me"}  # the same tenant token
        status, listed, _ = http("GET", f"{fresh.url}/v1/jobs", token=tenant.token)
        assert [j["job_id"] for j in listed["jobs"]] == [job["job_id"]]  # not the later one
        status, _, _ = http("POST", f"{fresh.url}/v1/jobs", body, token=tenant.token)
        assert status == 201  # the new log applies on top of the restored state
        status, listed, _ = http("GET", f"{fresh.url}/v1/jobs", token=tenant.token)
        assert len(listed["jobs"]) == 2


def test_restore_refuses_what_is_not_a_backup(tmp_path: Path) -> None:
    [node] = make_nodes(tmp_path, 1)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 100)
    result = schedd("restore", "--config", str(node.config_path), str(junk), "--yes")
    assert result.returncode == 2 and "is not a schedd database" in result.stderr
    assert not (node.data_dir / "state.db").exists()


@pytest.mark.slow
def test_restore_and_a_second_process_refuse_a_running_nodes_data(tmp_path: Path) -> None:
    with running(make_nodes(tmp_path, 1)) as [node]:
        backup = tmp_path / "b.db"
        assert schedd("backup", "--config", str(node.config_path), str(backup)).returncode == 0
        result = schedd("restore", "--config", str(node.config_path), str(backup), "--yes")
        assert result.returncode == 2 and "in use by a running node" in result.stderr
        second = subprocess.run(
            [SCHEDD, "serve", "--config", str(node.config_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2 and "used by another schedd process" in second.stderr
        status, _, _ = http("GET", f"{node.url}/readyz", token=None)
        assert status == 200  # the running node was not disturbed
