"""Which copy a SACK proves arrived (issue 45 item 5): a resend that left twice.

Fuzz seed 19, draw 24: host 0's link to plane 0 is black-holed. A packet's first copy dies
there; its tail resend leaves twice at once, on plane 0 and (its twin) on plane 1; the twin
arrives but its SACK is lost, and a third copy leaves on plane 1. A later SACK acknowledges
the packet 4.05 us after the third copy left, under 3/4 of the fastest round trip: an
earlier copy arrived. The record keeps one "copy before the latest", named by the EV it was
declared lost on -- plane 0's -- so the twin's arrival was credited to the black-holed path
and the undo brought its 12 EVs back 6.4 us later, while the plane was still dead.
"""

from __future__ import annotations

from mrc_host.sim import scenario_file as sf
from mrc_host.sim.fuzz import run_checked

DRAW_19_24 = """
name = "fuzz"
seed = 357
modes = ["mrc"]
faults = ["down:h4-p0@567630ns-1108230ns", "blackhole:h0-p0@567630ns-1108230ns", \
"flap=54060ns:p0-t0_2-t1_0@567630ns-891990ns"]

[fabric]
planes = 2
t0 = 4
t1 = 5
hosts_per_t0 = 2
link_delay = "500ns"

[[traffic]]
pattern = "incast"
name = "t0-incast"
dst = 5
senders = [4, 3, 1, 7, 0]
size = 262144
start = "540600ns"
stagger = "1310ns"
"""


def test_a_twinned_resend_s_arrival_does_not_bring_a_dead_plane_back() -> None:
    """On main the dead_ev invariant failed here (plane 0's EVs GOOD again 2.9 RTT after
    its first loss, the plane still black-holed)."""
    r = run_checked(sf.load_text(DRAW_19_24, "draw 24"))
    assert "crash" not in r["failed"]
    assert r["verdicts"]["dead_ev"]["violations"] == []
    assert r["verdicts"]["data"]["violations"] == []
