"""The cluster's measured drain rate and how late a forecast peak would run at it.

`DrainMeter` is fed this node's claim counter and whether the due index has a backlog; while a
backlog lasts it measures the claim rate sustained over SUSTAIN_S, scaled from this node's share
of the partitions to the cluster's (runs are spread over partitions by a hash of the job id), and
remembers the best of the last REMEMBER_S: what the cluster showed it can drain. Pure: callers
pass the readings and the monotonic time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

SUSTAIN_S = 10.0  # a rate counts once the backlog has lasted this long
REMEMBER_S = 6 * 3600.0  # the best rates of the last six hours' spikes
BEST_EVERY_S = 60.0  # one remembered best a minute: at most REMEMBER_S / BEST_EVERY_S of them


class DrainMeter:
    """The best claim rate sustained through a backlog in recent spikes (runs/s, cluster)."""

    def __init__(self, *, sustain_s: float = SUSTAIN_S, remember_s: float = REMEMBER_S) -> None:
        self._sustain_s = sustain_s
        self._remember_s = remember_s
        self._backlog: deque[tuple[float, float]] = deque()  # (at_s, claimed) since it began
        self._best: deque[tuple[float, float]] = deque()  # (minute start s, best rate in it)

    def sample(self, at_s: float, claimed: float, *, is_backlogged: bool, share: float) -> None:
        """One reading: this node's claimed-runs counter, whether runs are waiting past their
        fire time, and this node's share of the partitions (0: it measures nothing)."""
        if not is_backlogged or share <= 0:
            self._backlog.clear()
            return
        self._backlog.append((at_s, claimed))
        while len(self._backlog) > 2 and at_s - self._backlog[1][0] >= self._sustain_s:
            self._backlog.popleft()  # keep one reading at least sustain_s old
        first_s, first_claimed = self._backlog[0]
        if at_s - first_s >= self._sustain_s:
            self._remember(at_s, max(claimed - first_claimed, 0.0) / (at_s - first_s) / share)

    def _remember(self, at_s: float, rate: float) -> None:
        minute = at_s // BEST_EVERY_S * BEST_EVERY_S
        if self._best and self._best[-1][0] == minute:
            if rate > self._best[-1][1]:
                self._best[-1] = (minute, rate)
        else:
            self._best.append((minute, rate))

    def capacity(self, now_s: float) -> float | None:
        """The best rate remembered (None: no sustained backlog seen in REMEMBER_S)."""
        while self._best and self._best[0][0] < now_s - self._remember_s:
            self._best.popleft()
        best = max((rate for _, rate in self._best), default=0.0)
        return best if best > 0 else None


def overload_s(runs_per_second: Iterable[int], capacity: float) -> float:
    """How late the last run of the worst second would be, draining at `capacity` runs/s what
    each second adds (the runs of a lone spike's peak second: its size over the rate, less one
    second's worth)."""
    backlog = worst = 0.0
    for runs in runs_per_second:
        backlog = max(backlog + runs - capacity, 0.0)
        worst = max(worst, backlog)
    return worst / capacity
