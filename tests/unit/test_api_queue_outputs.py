"""The queue routes' outputs (issue 34, log level 12): kept bounded, only for the request's own
receipts, and left out while a member of the cluster cannot apply them yet (an ack must not
wait for a rolling upgrade)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from schedd.api.context import ApiContext
from schedd.api.queues import _outputs
from schedd.peers import PeerReport, PeerReports


def context(peer_level: int) -> ApiContext:
    peers = PeerReports("n1")
    peers.record({"n2": PeerReport(log_level=peer_level)}, ["n1", "n2"])
    storage: Any = SimpleNamespace(peers=peers)
    return cast(ApiContext, SimpleNamespace(storage=storage))


def test_outputs_are_kept_for_the_requests_receipts_bounded() -> None:
    asked = {"a.1": "x" * 9_000, "b.2": "hi", "elsewhere.3": "not settled here"}
    kept = _outputs(context(12), {"a.1": "a.1", "b.2": "b.2"}, asked)
    assert set(kept) == {"a.1", "b.2"} and kept["b.2"] == "hi"
    assert "808 characters left out" in kept["a.1"] and len(kept["a.1"]) < 9_000


def test_outputs_are_left_out_while_a_member_lags_level_12() -> None:
    assert _outputs(context(11), {"a.1": "a.1"}, {"a.1": "hi"}) == {}
    assert _outputs(context(12), {"a.1": "a.1"}, {"a.1": "hi"}) == {"a.1": "hi"}


def test_outputs_are_kept_under_the_stores_receipts() -> None:
    kept = _outputs(context(12), {"c1~a.1": "a.1"}, {"c1~a.1": "hi", "c2~a.1": "no"})
    assert kept == {"a.1": "hi"}
