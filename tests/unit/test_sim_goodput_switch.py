"""``Network.keep_goodput``: off, no per-packet goodput series is kept, and nothing else changes.

The series (two 64-bit integers a packet placed) is what reports and fault benches read; a run that
reads none of it (``bench.xcheck_sim``, timed against htsim) keeps ~1.5 MB less of the 128-host
permutation's peak without it."""

from __future__ import annotations

from typing import Any

from bench.xcheck_sim import Case, XFabric, run_mrcsim
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.network import FlowSpec, Network


def _run(keep: bool) -> tuple[Network, Any, Any]:
    net = Network(FabricShape(planes=2, t0=2, t1=2, hosts_per_t0=2), seed=4, payload="virtual")
    net.keep_goodput = keep
    conn = net.add_flow(FlowSpec("f", 0, 3), 1 << 20)
    w = net.post(conn, 1 << 20)
    net.run(50_000_000)
    return net, conn, w


def test_without_the_series_the_run_is_the_same_and_keeps_no_samples() -> None:
    net_on, on, w_on = _run(True)
    net_off, off, w_off = _run(False)
    assert w_on.done and w_off.done and on.data_ok and off.data_ok
    assert len(on.goodput_samples) >= 256  # 1 MiB / 4 KiB packets placed
    assert off.goodput_samples == [] and len(off.placed_ns) == 0
    assert (w_on.received_ns, net_on.loop.events) == (w_off.received_ns, net_off.loop.events)
    assert on.receiver.counters.as_dict() == off.receiver.counters.as_dict()


def test_the_xcheck_run_keeps_no_series() -> None:
    made: list[Network] = []
    real_init = Network.__init__

    def spy(self: Network, *a: Any, **k: Any) -> None:
        real_init(self, *a, **k)
        made.append(self)

    Network.__init__ = spy  # type: ignore[method-assign]
    try:
        out = run_mrcsim(XFabric(t0=2, t1=2, hosts_per_t0=2), Case("pair", ((0, 3),), 64 << 10), 1)
    finally:
        Network.__init__ = real_init  # type: ignore[method-assign]
    assert out["completed"] and len(made) == 1
    assert not made[0].keep_goodput
    assert all(len(c.placed_ns) == 0 for c in made[0].connections)
