"""The tail probe and RACK inside an incast's last-hop queue (issue 45 item 8).

The peer's host port marks nothing and trims only when its queue is full (21 us at 100 Gb/s),
so while seven senders' first windows wait there, a sender learns of the queue only from its
round trips rising. Fuzz seed 16, draw 3 (no fault, 7 x 32 KiB into one host): the tail
probe fired 3.5 us after the newest packet left, its SACK came at 6.3 us, and three of the
seven connections resent a packet none of them lost. While delays are not flat, a packet is
not overdue before its plane's latest SACK plus the longest latest round trip and the reorder
window (``recovery.queue_floor``): a plane still SACKing is draining its queue, a dead one
SACKs nothing more and leaves the timers where they were.
"""

from __future__ import annotations

from mrc_host.core import TransportConfig
from mrc_host.core.records import TxRecord
from mrc_host.core.recovery import Recovery
from mrc_host.sim import scenario_file as sf
from mrc_host.sim.fuzz import run_checked
from mrc_host.wire.messages import Opcode
from tests.unit.loss_rig import deliver, packet, recovery, transmit

PLANE1 = 1 << 28
WINDOW = 500


def queued_fabric() -> Recovery:
    """Departures reported, both planes' round trips rising 1.5 -> 2.9 us (a queue building at
    the peer's port): not flat. Plane 0 last SACKed at 12 us, plane 1 at 5 us (then silent)."""
    cfg = TransportConfig(
        rto_min_ns=1_000, rto_initial_ns=50_000, nic_departures=True, reorder_window_ns=WINDOW
    )
    r = recovery(cfg)
    for i, rtt in enumerate((1_500, 1_900, 2_500, 2_900)):
        r.rtt.sample(rtt)
        r.rtt.sample_plane(1, rtt, 2_000 + 1_000 * i)
        r.rtt.sample_plane(0, rtt, 9_000 + 1_000 * i)
    assert not r.rtt.flat(0) and not r.rtt.flat(1)
    assert r.rtt.plane_at == [12_000, 5_000]
    return r


def send(r: Recovery, seq: int, ev: int, at: int, opcode: Opcode = Opcode.WRITE_MIDDLE) -> TxRecord:
    rec = transmit(r, packet(seq, 100, opcode), ev, at)
    r.nic.on_departed(rec, at)
    return rec


def test_the_tail_probe_waits_while_its_plane_still_sacks() -> None:
    """Defect: the probe was due the latest round trip and the window after the newest packet
    left (10 + 2.9 + 0.5 us) although its plane had SACKed an older packet at 12 us."""
    r = queued_fabric()
    send(r, 0, 0, 10_000, Opcode.WRITE_LAST)  # SACKed at once: ``probe_due``
    r.on_progress(12_000, True)
    assert r.tail_at(False) == 12_000 + 2_900 + r.reorder_window()


def test_the_tail_probe_of_a_silent_plane_is_due_as_before() -> None:
    """Plane 1 SACKed nothing since 5 us: the floor (5 + 2.9 + window) is behind the probe's
    own time, which stays the newest packet's departure + latest round trip + window."""
    r = queued_fabric()
    send(r, 0, PLANE1, 10_000, Opcode.WRITE_LAST)
    r.on_progress(12_000, True)
    assert r.tail_at(False) == 10_000 + 2_900 + r.reorder_window()


def overtaken(r: Recovery, ev: int, by_ev: int) -> TxRecord:
    """A packet on ``ev`` left at 8 us, one sent after it on ``by_ev`` SACKed at 11.5 us."""
    rec = send(r, 0, ev, 8_000)
    later = send(r, 1, by_ev, 8_400)
    deliver(r, later, 11_500)
    r.gap_losses([later], 11_500)
    r.note_rack([later])
    return rec


def test_rack_on_another_plane_s_evidence_waits_while_its_plane_still_sacks() -> None:
    """Defect: overtaken by plane 1 only, a packet of plane 0 -- whose SACKs were still coming
    at 12 us -- was lost at RACK's time (12.8 us), inside the plane's queue."""
    r = queued_fabric()
    draining = overtaken(r, 0, PLANE1)
    floor = 12_000 + 2_900 + r.reorder_window()
    assert r.rack_at(sending=False) == floor
    assert r.rack_losses(floor - 1, sending=False) == []
    assert r.rack_losses(floor, sending=False) == [draining]


def test_rack_is_as_before_for_a_silent_plane_and_on_its_own_plane_s_evidence() -> None:
    """Plane 1 SACKed nothing since 5 us: its floor is behind RACK's own time. And the last
    hop is one FIFO per plane: a later packet of the same plane delivered first says this one
    is not queued there (a T1 down inside a live plane), so no floor either."""
    silent = queued_fabric()
    overtaken(silent, PLANE1, 0)
    own = queued_fabric()
    overtaken(own, 0, 0)
    for r in (silent, own):
        due = r.rack_at(sending=False)
        assert due is not None and due < 12_000 + 2_900 + r.reorder_window()
        assert len(r.rack_losses(due, sending=False)) == 1


DRAW_16_3 = """
name = "fuzz"
seed = 478
modes = ["mrc"]
faults = []

[fabric]
planes = 1
t0 = 4
t1 = 3
hosts_per_t0 = 2
link_delay = "200ns"

[[traffic]]
pattern = "incast"
name = "t0-incast"
dst = 4
senders = [3, 2]
size = 1048576
stagger = "41943ns"

[[traffic]]
pattern = "incast"
name = "t1-incast"
dst = 2
senders = [4, 6, 3, 5, 1, 7, 0]
size = 32768
start = "90180ns"
stagger = "218ns"
"""


def test_an_incast_s_queue_draws_no_resend() -> None:
    """On main three of the seven connections into host 2 resent a packet (resend invariant:
    no drop, no trim, so nothing to resend)."""
    r = run_checked(sf.load_text(DRAW_16_3, "draw 3"))
    assert r["verdicts"]["resend"]["violations"] == []
    assert r["failed"] == []
