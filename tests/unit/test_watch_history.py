"""The demo's EV record: the agent's exact history replaces polled changes per EV, never the
polled changes of EVs whose history the agent has already evicted (topologies.watch)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from mrc_fabric.ev import EV
from topologies.watch import EvChange, TransferWatch


class FakeClient:
    def __init__(self, history: list[dict[str, Any]]) -> None:
        self.history = history

    def stats(self) -> dict[str, Any]:
        return {"connections": [{"peer": "h3", "conn": "send", "ev_history": self.history}]}


def test_polled_changes_stay_for_evs_the_history_no_longer_holds() -> None:
    a, b = EV(plane=1, t1=1, entropy=1), EV(plane=1, t1=1, entropy=2)
    ha, hb = str(a), str(b)
    watch: Any = SimpleNamespace(_t0=0.0, dst="h3")
    watch.ev_changes = [
        EvChange(2.5, ha, 1, 1, "GOOD", "ASSUMED_BAD"),  # a's change, evicted from the history
        EvChange(2.5, hb, 1, 1, "GOOD", "ASSUMED_BAD"),  # b's, polled late
    ]
    exact_b = {"t_ns": 2_400_000_000, "ev": hb, "old": "GOOD", "new": "ASSUMED_BAD", "reason": "loss"}
    probe_b = {"t_ns": 2_700_000_000, "ev": hb, "old": "ASSUMED_BAD", "new": "ASSUMED_BAD"}
    TransferWatch._merge_history(watch, FakeClient([exact_b, probe_b]))
    assert [(c.ev, c.t, c.new) for c in watch.ev_changes] == [
        (hb, 2.4, "ASSUMED_BAD"),
        (ha, 2.5, "ASSUMED_BAD"),
        (hb, 2.7, "ASSUMED_BAD"),
    ]
