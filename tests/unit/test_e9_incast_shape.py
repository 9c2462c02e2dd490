"""E9's incast measures the bystander against a link's rate, not the CPU's.

On unlimited links the bystander's 4 MiB took ~30 ms at whatever its agent reached (0.4-1.6
Gbit/s), so "with incast / alone" compared two CPU samples (0.45-1.31 over three runs). The
incast part now runs on links at a set rate, twice its slowed last hop, with a bystander that
must end inside the incast; the shape is also a mrc-sim scenario, for the core without the live
fabric.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from bench.evidence import CANNOT
from bench.experiments import e9_congestion as e9
from bench.experiments.transfer import run_concurrent

SCENARIO = Path(e9.__file__).with_name("e9_incast_shape.toml")


def test_incast_links_are_the_bottleneck_of_both_flows() -> None:
    for target, link in e9.INCAST_LINK_MBIT.items():
        last_hop = (
            e9.LINUX_INCAST_MBIT if target == "linux" else e9.BMV2_INCAST_PPS * e9.FRAME_BYTES * 8 / 1e6
        )
        assert link >= 2 * last_hop * 0.99, (target, link, last_hop)
    assert e9.OUTLASTED.startswith(CANNOT)  # a run that cannot show it decides nothing


class _Client:
    def __init__(self, sent: list[tuple[str, int]], lock: threading.Lock) -> None:
        self.sent, self.lock = sent, lock

    def evs(self) -> list[dict[str, Any]]:
        return []

    def send(self, dst: str, size: int, mode: str, on_progress: Any) -> dict[str, Any]:
        with self.lock:
            self.sent.append((dst, size))
        on_progress({"bytes_acked": size})
        return {"ok": True, "bytes_acked": size}


class _Tb:
    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []
        self.client = _Client(self.sent, threading.Lock())

    def agent(self, name: str) -> Any:
        return self

    @property
    def controller(self) -> Any:
        raise AssertionError("no fault, no deadline: the controller is not called")


def test_run_concurrent_sends_each_pair_its_own_size() -> None:
    tb = _Tb()
    runs, _ = run_concurrent(tb, [("a", "b"), ("c", "d")], 1 << 20, "mrc", sizes=[8 << 20, 1 << 20])
    assert sorted(tb.sent) == [("b", 8 << 20), ("d", 1 << 20)]
    assert [r.size for r in runs] == [8 << 20, 1 << 20] and all(r.ok for r in runs)


def test_the_live_shape_is_a_valid_sim_scenario() -> None:
    from mrc_host.sim.scenario_file import load

    sc = load(SCENARIO)
    names = [t.name for t in sc.traffic]
    assert names == ["incast", "bystander"]
    assert (sc.shape.planes, sc.shape.t0, sc.shape.t1, sc.shape.hosts_per_t0) == tuple(
        e9.SHAPE_FABRIC.values()
    )


def test_bmv2_queues_have_room_to_trim() -> None:
    """simple_switch's 64-packet queues filled before the controller's trim threshold (64)."""
    from types import SimpleNamespace

    from bench.experiments.common import room_to_trim
    from controller.compiler import CompileOptions

    depths: list[tuple[str, int | None, int]] = []

    def switch(name: str) -> Any:
        return SimpleNamespace(set_queue_depth=lambda port, d: depths.append((name, port, d)))

    for target in ("linux", "bmv2"):
        tb = SimpleNamespace(
            choice=SimpleNamespace(target=SimpleNamespace(value=target)),
            net=SimpleNamespace(switches=[switch("s1"), switch("s2")]),
        )
        room_to_trim(tb)
    assert [n for n, _p, _d in depths] == ["s1", "s2"]  # BMv2's only
    assert all(port is None and d > CompileOptions().trim_threshold for _n, port, d in depths)
