"""A T1 that stops is found path by path, by each path's own delay (issue 66: no dead EV
for a connection alive at the failure; a flapping link costs at most 1.1 x the job's time).

Fuzz seed 3131, draw 903: eight planes, plane 5's host links at 10 Gb/s, a T1 of plane 3 down
for 300 us under a 7 -> 1 incast beside a 16 MiB flow, a NIC link of plane 7 flapping. The
incast's queues made the gap rule wait out a wide reordering window, and connection 2 -> 1
kept the dead T1's EVs GOOD 5.2 RTT after its first loss there (limit 5); the flapping job took
1.13 x its time without the flap. A path whose oldest packet is overdue by the path's own
latest delay, while a later packet of its plane arrived by another path, is now retired at
once (``PathWatch``).
"""

from __future__ import annotations

from mrc_host.sim import scenario_file as sf
from mrc_host.sim.fuzz import run_checked

DRAW_3131_903 = """
name = "fuzz"
seed = 561
modes = ["mrc"]
faults = ["switch-down:p3-t1_5@38867ns-339467ns", "flap=60120ns:h4-p7@62704ns-423424ns",
  "rate=10:h0-p5@0", "rate=10:h1-p5@0", "rate=10:h2-p5@0", "rate=10:h3-p5@0", "rate=10:h4-p5@0",
  "rate=10:h5-p5@0", "rate=10:h6-p5@0", "rate=10:h7-p5@0"]

[fabric]
planes = 8
t0 = 4
t1 = 12
hosts_per_t0 = 2
link_delay = "200ns"

[[traffic]]
pattern = "flow"
name = "t0-flow"
src = 5
dst = 4
size = 16777216

[[traffic]]
pattern = "incast"
name = "t1-incast"
dst = 1
senders = [7, 6, 3, 0, 5, 4, 2]
size = 2097152
stagger = "873ns"
"""


def test_a_stopped_t1_is_retired_path_by_path() -> None:
    """On main: dead_ev 5.2 RTT (limit 5) for 2 -> 1 on p3-t1_5, and the flap invariant 1.13."""
    r = run_checked(sf.load_text(DRAW_3131_903, "draw 903"))
    verdicts = r["verdicts"]
    assert r["failed"] == [], {k: v["violations"] for k, v in verdicts.items() if v["violations"]}
    assert verdicts["dead_ev"]["checked"] > 0  # (the T1's paths were judged: it did kill packets)
