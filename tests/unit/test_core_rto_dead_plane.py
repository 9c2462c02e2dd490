"""A plane the RTO shows dead is failed at the RTO (issue 45 item 4, the RTO split's follow-up).

Fuzz seed 16, draw 371: h7's link to plane 4 is black-holed; an incast into h11 fills the
connection 7 -> 11's window and its SACKs stop, so the dead-plane rule (which runs on a SACK)
does not judge plane 4. The RTO blames the 9 silent paths at 348.8 us and the split resends
them 13.2 us later; meanwhile the other planes have long delivered packets sent after plane 4's
last delivery. Until the rule judged the plane at 394.7 us, 4 more packets went onto its paths
not yet blamed: 13 lost against a floor limit of 11.4 (and the paths GOOD 5.6 RTT after the
first loss, over the dead_ev limit of 5). ``rto_dead_planes`` takes the RTO's silence of two
paths or more, with that evidence, as the plane's.
"""

from __future__ import annotations

from mrc_host.sim import scenario_file as sf
from mrc_host.sim.fuzz import run_checked

DRAW_16_371 = """
name = "fuzz"
seed = 627
modes = ["mrc"]
faults = ["blackhole:h7-p4@248341ns", "switch-down:p2-t1_3@248341ns-308461ns"]

[fabric]
planes = 5
t0 = 3
t1 = 13
hosts_per_t0 = 4
link_delay = "200ns"

[[traffic]]
pattern = "incast"
name = "t0-incast"
dst = 9
senders = [11, 10, 1, 6, 2, 5, 8, 0]
size = 655360
start = "90180ns"
stagger = "748ns"

[[traffic]]
pattern = "incast"
name = "t1-incast"
dst = 11
senders = [8, 0, 4, 3, 1, 6, 7, 9]
size = 655360
start = "300600ns"
stagger = "374ns"

[[traffic]]
pattern = "permutation"
name = "t2-permutation"
hosts = [1, 3, 4, 5, 6, 7, 8, 9, 10, 11]
size = 655360
start = "300600ns"
"""


def test_the_rto_fails_a_black_holed_plane_whose_sacks_stopped() -> None:
    """On main the floor invariant failed here (7 -> 11 lost 13, limit 11.4) and dead_ev too."""
    r = run_checked(sf.load_text(DRAW_16_371, "draw 371"))
    assert "crash" not in r["failed"]
    assert r["verdicts"]["floor"]["violations"] == []
    assert r["verdicts"]["dead_ev"]["violations"] == []
    assert r["verdicts"]["data"]["violations"] == []
