"""A slow plane that still delivers is not a silent plane (issue 66, item 6: no resend
without a drop or trim).

Fuzz seed 1127, draw 723: two planes, plane 0's host links at 25 Gb/s and plane 1's T1 links
at 10 Gb/s, a 3 -> 1 incast. Plane 1's queue grows, so the oldest packet in flight on it
waits longer than the plane's latest round trip plus the reorder window, while the plane
keeps delivering at its own spacing. The silent-plane watch took that for a dead plane and
flushed it: connection 2 -> 3 resent 11 packets with nothing dropped or trimmed. The watch
now also asks whether the plane's latest delivery is older than what its own service gap
explains (``PlaneWatch.delivering``).
"""

from __future__ import annotations

from mrc_host.sim import scenario_file as sf
from mrc_host.sim.fuzz import run_checked

DRAW_1127_723 = """
name = "fuzz"
seed = 327
modes = ["mrc"]
faults = ["loss=0.001:p1-t0_1-t1_4@47030ns-235150ns", "rate=10:p1-t1_0@0", "rate=10:p1-t1_1@0",
  "rate=10:p1-t1_2@0", "rate=10:p1-t1_3@0", "rate=10:p1-t1_4@0", "rate=10:p1-t1_5@0",
  "rate=10:p1-t1_6@0", "rate=10:p1-t1_7@0", "rate=10:p1-t1_8@0", "rate=10:p1-t1_9@0",
  "rate=10:p1-t1_10@0", "rate=10:p1-t1_11@0", "rate=10:p1-t1_12@0", "rate=10:p1-t1_13@0",
  "rate=10:p1-t1_14@0", "rate=25:h0-p0@0", "rate=25:h1-p0@0", "rate=25:h2-p0@0", "rate=25:h3-p0@0"]

[fabric]
planes = 2
t0 = 2
t1 = 15
hosts_per_t0 = 2
link_delay = "1000ns"

[[traffic]]
pattern = "incast"
name = "t0-incast"
dst = 3
senders = [1, 0, 2]
size = 262144
stagger = "655ns"
"""


def test_a_slow_plane_still_delivering_is_not_flushed() -> None:
    """On main connection 2 -> 3 resent 11 packets here, none of them dropped or trimmed."""
    r = run_checked(sf.load_text(DRAW_1127_723, "draw 723"))
    assert "crash" not in r["failed"]
    verdicts = r["verdicts"]
    assert verdicts["resend"]["violations"] == []
    # and what the watch is for still holds: nothing lost past the floor, no dead EV kept
    assert verdicts["floor"]["violations"] == []
    assert verdicts["dead_ev"]["violations"] == []
    assert verdicts["data"]["violations"] == []
