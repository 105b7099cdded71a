"""One seeded chaos round in the normal suite (about 90 s): a three-node cluster on loopback
under kill -9 of the leader, kill -9 of all nodes, SIGSTOP of the leader and of a follower past
the lease ttl, and a restart under CPU load, with the full history check.

Another seed: SCHEDD_CHAOS_SEED=N; namespace partitions too (root): SCHEDD_CHAOS_NETNS=1."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.chaos.runner import run_round

pytestmark = pytest.mark.cluster
SEED = int(os.environ.get("SCHEDD_CHAOS_SEED", "20261130"))
USE_NETNS = os.environ.get("SCHEDD_CHAOS_NETNS") == "1"
WORKLOAD_S = 75.0


@pytest.mark.timeout(480)
def test_a_seeded_chaos_round_has_no_violation(tmp_path: Path) -> None:
    report = run_round(SEED, WORKLOAD_S, tmp_path, use_netns=USE_NETNS)
    (tmp_path / "report.json").write_text(json.dumps(report, indent=1, default=str))
    stats = report["stats"]
    summary = {k: report[k] for k in ("seed", "violation_counts")} | {"report": str(tmp_path)}
    assert report["violations"] == [], json.dumps(summary | {"first": report["violations"][:20]})
    assert len(report["faults"]["events"]) >= 3, report["faults"]  # the faults really happened
    # Skipped runs (a calendar's days, overlap and misfire skips) are delivered to nobody.
    delivered = stats["runs"] - stats["run_status"].get("skipped", 0)
    assert stats["runs"] > 200 and stats["deliveries"] >= delivered * 0.9, stats
