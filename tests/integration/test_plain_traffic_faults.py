"""Plain traffic rides static kernel routes, as documented (docs/mininet-p4.md): a dead link
stops a ping hashed onto it for as long as it is dead, and the same fault costs an MRC transfer
nothing but a retired path. Node prefix ``ptf``, the Linux target."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from live_fabric import running_testbed, skip_without_agent

pytestmark = pytest.mark.root

PREFIX = "ptf"


@pytest.fixture(scope="module")
def testbed() -> Iterator[Any]:
    skip_without_agent()
    with running_testbed(PREFIX, "linux") as tb:
        yield tb


def ping_loss(tb: Any) -> int:
    h0, h3 = tb.net.get(f"{PREFIX}h0"), tb.net.get(f"{PREFIX}h3")
    out = h0.cmd(f"ping -c 5 -i 0.2 -W 1 {h3.IP()}")
    m = re.search(r"(\d+)% packet loss", out)
    assert m is not None, out
    return int(m.group(1))


def test_a_dead_link_stops_the_pings_hashed_onto_it_and_mrc_carries_on(testbed: Any) -> None:
    assert ping_loss(testbed) == 0
    losses = {}
    for plane in (0, 1):
        for t1 in (0, 1):
            link = f"{PREFIX}t0p{plane}n0-{PREFIX}t1p{plane}n{t1}"
            fault = testbed.controller.inject("blackhole", link)
            try:
                losses[link] = ping_loss(testbed)
                summary = testbed.send(f"{PREFIX}h0", f"{PREFIX}h3", 1 << 20)
                assert summary["ok"] and summary["verified"], (link, summary)
            finally:
                testbed.controller.clear(fault.id)
    # the kernel's static routes: a path carrying the ping dies totally, one not carrying it is
    # no concern of it
    assert 100 in losses.values() and 0 in losses.values(), losses
    assert ping_loss(testbed) == 0  # cleared: the same static route works again
