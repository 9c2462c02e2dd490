"""The compiled core handles DATA and answers it without running the enum module's Python.

Why: ``DataFlag`` is an ``IntFlag``; an operator on it runs ``enum.py``'s ``__and__`` (and
builds a new member) as interpreted Python, about 0.5 µs, where the same operator on an
``int``-typed variable is one native instruction once compiled. The receiver answers every
``ack_every``-th DATA packet with a SACK, so one such operator there is paid at that rate by
the agent and by mrc-sim alike. (Pure Python pays it whatever the annotation: the check
needs the compiled modules.)
"""

from __future__ import annotations

import random
import sys
from types import FrameType
from typing import Any

import pytest

import mrc_host
from mrc_host.sim.loopback import BASE, RKEY, make_pair


def _enum_calls_during(run: Any) -> list[str]:
    """The enum.py functions entered (as Python) while ``run()`` runs."""
    seen: list[str] = []

    def prof(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and frame.f_code.co_filename.endswith("enum.py"):
            seen.append(frame.f_code.co_name)

    sys.setprofile(prof)
    try:
        run()
    finally:
        sys.setprofile(None)
    return seen


@pytest.mark.parametrize("loss_every", [0, 7])
def test_the_compiled_receiver_runs_no_enum_code_per_packet(loss_every: int) -> None:
    import mrc_host.core.receiver as receiver

    if receiver.__name__ not in mrc_host.compiled_modules():
        pytest.skip("the core runs as pure Python here (MRC_PURE_PYTHON or not built)")
    p = make_pair(size=1 << 16, ack_every=2)
    data = random.Random(5).randbytes(1 << 16)
    _, acts = p.a.post_write(data, BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    lost = iter(range(1, 10**6))

    def deliver() -> None:  # (every ``loss_every``-th frame lost: resends, RETRANSMISSION flags)
        p.deliver(keep=lambda _m: not loss_every or next(lost) % loss_every != 0)
        for _ in range(200):  # timers until the write is acknowledged
            if p.sent_done():
                break
            p.now += 100_000
            p.absorb(p.a, p.a.on_timer(p.now))
            p.deliver()

    calls = _enum_calls_during(deliver)
    region = p.b.regions.get(RKEY)
    assert region is not None and bytes(region.buffer) == data  # the transfer did run
    assert p.b.counters.sacks_sent > 0
    assert calls == [], calls[:10]
