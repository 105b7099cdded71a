"""The job routes' side of job versions during a rolling upgrade (log level 8): the level-8 forms
only once every member applies them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from schedd.api.context import ApiContext
from schedd.api.http import _check_cluster_can_take
from schedd.api.versions import versions_recorded
from schedd.errors import ClusterUnavailable
from schedd.peers import PeerReport, PeerReports
from schedd.storage import DiskWatch, MinFree, StorageGuard
from schedd.store.commands import PauseJob


def guard(tmp_path: Path, level_of_n3: int | None) -> StorageGuard:
    peers = PeerReports("n1")
    if level_of_n3 is not None:
        reports = {"n2": PeerReport(log_level=8), "n3": PeerReport(log_level=level_of_n3)}
        peers.record(reports, ["n1", "n2", "n3"])
    return StorageGuard(DiskWatch(tmp_path, MinFree(bytes=0)), peers)


def context(storage: StorageGuard | None) -> ApiContext:
    return cast(ApiContext, SimpleNamespace(storage=storage))


@pytest.mark.parametrize(("level_of_n3", "recorded"), [(None, False), (7, False), (8, True)])
def test_changes_are_versioned_once_every_member_applies_level_8(
    tmp_path: Path, level_of_n3: int | None, recorded: bool
) -> None:
    storage = guard(tmp_path, level_of_n3)
    assert versions_recorded(context(storage)) is recorded
    cmd = PauseJob(tenant_id="t1", job_id="j", versioned=versions_recorded(context(storage)))
    _check_cluster_can_take(storage, cmd)  # the form chosen is one every member applies
    if not recorded and level_of_n3 is not None:
        with pytest.raises(ClusterUnavailable, match="n3 must run"):
            _check_cluster_can_take(storage, PauseJob(tenant_id="t1", job_id="j", versioned=True))


def test_a_node_without_peers_records_versions() -> None:
    assert versions_recorded(context(None))
