"""`python -m tests.chaos --seed N --duration S [--report PATH]`: a campaign of seeded rounds
(seed, seed+1, ...) that fits in about S seconds; a JSON report; exit 1 on any violation."""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.chaos.checker import percentiles
from tests.chaos.netns import netns_available
from tests.chaos.runner import run_round, say

ROUND_OVERHEAD_S = 60.0  # start-up, quiescence and checking around each round's workload


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--seed", type=int, default=None, help="first seed (default: random)")
    parser.add_argument("--duration", type=float, default=600.0, help="campaign budget, s")
    parser.add_argument("--round", type=float, default=120.0, help="workload per round, s")
    parser.add_argument("--report", type=Path, default=Path("chaos-report.json"))
    parser.add_argument(
        "--netns",
        choices=("auto", "on", "off"),
        default="auto",
        help="network-namespace partitions (root and `ip netns` needed; auto: when possible)",
    )
    parser.add_argument("--keep", action="store_true", help="keep node data and logs")
    parser.add_argument(
        "--upgrade-from",
        metavar="REV",
        help="a rolling upgrade in every round: the nodes start on git revision REV and are "
        "restarted on today's code one by one during the workload",
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1, 1_000_000)
    use_netns = args.netns == "on" or (args.netns == "auto" and netns_available())
    say(
        f"campaign: first seed {seed}, budget {args.duration:g}s, rounds of {args.round:g}s, "
        f"netns={'on' if use_netns else 'off'}"
    )
    started = time.monotonic()
    rounds: list[dict[str, Any]] = []
    while not rounds or time.monotonic() - started + args.round + ROUND_OVERHEAD_S <= args.duration:
        round_seed = seed + len(rounds)
        base = Path(tempfile.mkdtemp(prefix=f"chaos-{round_seed}-"))
        report = run_round(
            round_seed, args.round, base, use_netns=use_netns, upgrade_from=args.upgrade_from
        )
        report["data_dir"] = str(base)
        rounds.append(report)
        if report["violations"] or args.keep:
            say(f"node data and logs kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
        args.report.write_text(json.dumps(_summary(seed, rounds), indent=1, default=str))
    summary = _summary(seed, rounds)
    say(
        f"seeds {[r['seed'] for r in rounds]}: {summary['violations']} violation(s); "
        f"report {args.report}"
    )
    return 1 if summary["violations"] else 0


def _summary(seed: int, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "first_seed": seed,
        "seeds": [r["seed"] for r in rounds],
        "violations": sum(len(r["violations"]) for r in rounds),
        "violations_by_seed": {r["seed"]: r["violation_counts"] for r in rounds},
        "figures": figures(rounds),
        "rounds": rounds,
    }


def figures(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The campaign's numbers: per fault kind and role, time to a new leader and until every
    partition is leased to a live node; claim and delivery lag; cancel latency."""
    facts: dict[str, list[float]] = defaultdict(list)
    for report in rounds:
        for event in report["faults"]["events"]:
            for key, value in event["facts"].items():
                if key.endswith("_s") and isinstance(value, int | float):
                    facts[f"{key}:{event['kind']}:{event['role']}"].append(value)
    out: dict[str, Any] = {k: percentiles(v) for k, v in sorted(facts.items())}
    for key in (
        "claim_lag_s:other",
        "claim_lag_s:overlap_delay",
        "first_delivery_lag_s:queue",
        "first_delivery_lag_s:http",
        "cancel_latency_s",
    ):
        maxima = [r["stats"][key]["max"] for r in rounds if r["stats"].get(key, {}).get("max")]
        p99s = [r["stats"][key]["p99"] for r in rounds if r["stats"].get(key, {}).get("p99")]
        out[key] = {"worst_p99": max(p99s, default=None), "worst_max": max(maxima, default=None)}
    out["claims_after_acknowledged_cancel"] = sum(
        r["violation_counts"].get("claimed_after_cancel", 0) for r in rounds
    )
    return out


if __name__ == "__main__":
    sys.exit(main())
