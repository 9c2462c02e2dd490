"""How slow a NIC's planes are, shared by its connections (issue 66, item 6: no resend
without a drop or trim).

Fuzz seed 1127, draw 732: eight planes, plane 3's host links at 25 Gb/s and plane 2 at
75 Gb/s; an all-to-all runs from 162 us, a second one starts at 540 us. A connection of the
second has no round trip of plane 3 yet, so its loss rules timed that plane's first packets
by its round trip over the fast planes: eight connections resent two packets each, none of
them dropped or trimmed. The first all-to-all's connections on the same NICs had measured
plane 3 all along; with that shared (``NicPlaneDelays``), no connection resends.
"""

from __future__ import annotations

import pytest

from mrc_host.core import NicPlaneDelays
from mrc_host.sim import scenario_file as sf
from mrc_host.sim.fuzz import run_checked

DRAW_1127_732 = """
name = "fuzz"
seed = 240
modes = ["mrc"]
faults = ["down:p6-t0_0-t1_7@408860ns", "down:h5-p3@408860ns", "loss=0.001:h1-p2@408860ns",
  "rate=75:p2@0", {plane3}]
{config}
[fabric]
planes = 8
t0 = 2
t1 = 11
hosts_per_t0 = 3
link_delay = "500ns"

[[traffic]]
pattern = "all-to-all"
name = "t0-all-to-all"
hosts = [1, 3, 4, 5]
size = 32768
start = "540600ns"

[[traffic]]
pattern = "all-to-all"
name = "t1-all-to-all"
hosts = [0, 1, 2, 3, 4]
size = 131072
start = "162180ns"
"""


# plane 3 at 25 Gb/s: as drawn, at its host links; or inside the fabric, at its T1 links
AT_HOST_LINKS = ", ".join(f'"rate=25:h{h}-p3@0"' for h in range(6))
INSIDE = ", ".join(f'"rate=25:p3-t1_{k}@0"' for k in range(11))


def _draw(shared: bool, plane3: str = AT_HOST_LINKS) -> dict[str, object]:
    config = "" if shared else "\n[transport.config]\nshare_plane_delays = false\n"
    return run_checked(sf.load_text(DRAW_1127_732.format(config=config, plane3=plane3), "draw 732"))


def test_a_plane_the_nic_measured_slow_is_not_taken_for_lost_by_a_new_connection() -> None:
    r = _draw(shared=True)
    verdicts = r["verdicts"]
    assert isinstance(verdicts, dict)
    for name in ("resend", "floor", "dead_ev", "data"):
        assert verdicts[name]["violations"] == [], name


@pytest.mark.parametrize("shared", [True, False])
def test_shared_or_not_the_new_connections_resend_nothing(shared: bool) -> None:
    """The same draw with plane 3 slowed inside the fabric (its T1 links at 25 Gb/s, which no
    port rate shows), shared and with ``share_plane_delays`` off. Unshared, the new
    connections resent 6 packets, none lost; they now wait for a plane they have not heard of
    (``Recovery.unheard_due``), as they wait, slowed at its host links as drawn, for its
    port's rate (``NicClock.port_lag``)."""
    verdicts = _draw(shared=shared, plane3=INSIDE)["verdicts"]
    assert isinstance(verdicts, dict)
    for name in ("resend", "floor", "dead_ev", "data"):
        assert verdicts[name]["violations"] == [], name


def test_the_table_says_how_many_times_the_fastest_plane_a_plane_is() -> None:
    table = NicPlaneDelays(3)
    assert table.slowdown(1) == 1.0  # no sample: no slower than the others
    table.report(0, 10_000)
    table.report(1, 30_000)
    assert table.slowdown(0) == 1.0
    assert table.slowdown(1) == pytest.approx(3.0)
    assert table.slowdown(2) == 1.0
    for _ in range(64):  # smoothed as an SRTT: it follows the plane's samples
        table.report(1, 20_000)
    assert table.slowdown(1) == pytest.approx(2.0, rel=1e-3)
