"""``ControlOut``: how an endpoint's SACKs, NACKs and fallback PROBE_ACKs leave, and what they carry."""

from __future__ import annotations

import random

from mrc_host.core import EvSet, PathSpace, TransportConfig
from mrc_host.core.actions import Action, Transmit
from mrc_host.core.control import ControlOut
from mrc_host.core.counters import Counters
from mrc_host.core.recovery import PLANE_SHIFT
from mrc_host.wire.messages import Dscp, Ecn, Nack, NackReason, PathMeta, Sack


def make(retire: bool = True) -> tuple[ControlOut, EvSet, Counters]:
    cfg = TransportConfig()
    evset = EvSet(cfg, PathSpace(2, 8), random.Random(3))
    c = Counters()
    return ControlOut(evset, c, retire), evset, c


def test_a_control_message_leaves_on_a_control_ev_of_the_plane_asked_marked_and_counted() -> None:
    out_ctl, evset, c = make()
    sack = Sack(7, 1, 1, 0, 0x1234, meta=PathMeta(ev=0, ecn=int(Ecn.CE), dscp=int(Dscp.DATA)))
    out: list[Action] = []
    ev = out_ctl.send(sack, out, 1, 5_000)
    assert ev is not None and ev >> PLANE_SHIFT == 1
    assert len(out) == 1 and isinstance(out[0], Transmit) and out[0].msg is sack
    assert (sack.meta.ev, sack.meta.dscp, sack.meta.ecn) == (ev, Dscp.CONTROL, Ecn.NOT_ECT)
    assert c.per_ev[ev].control_packets_sent == 1
    e = evset.entries[ev]
    assert e.in_use and e.sent_ns == 5_000  # noted for the liveness checks


def test_without_path_retirement_nothing_is_noted_for_liveness() -> None:
    out_ctl, evset, c = make(retire=False)
    ev = out_ctl.send(Nack(7, 3, NackReason.TRIMMED, 0), [], None, 9_000)
    assert ev is not None and c.per_ev[ev].control_packets_sent == 1
    assert not evset.entries[ev].in_use and evset.next_liveness_ns is None


def test_with_no_usable_ev_nothing_is_sent_or_counted() -> None:
    out_ctl, evset, c = make()
    for ev in list(evset.entries):
        evset.deny(ev)
    out: list[Action] = []
    assert out_ctl.send(Sack(7, 1, 1, 0, 0), out, 0, 1) is None
    assert out == [] and not c.per_ev


def test_the_port_status_is_the_ev_sets_bitmap_as_it_is_now() -> None:
    out_ctl, evset, _ = make()
    assert out_ctl.port_status() == 0b11
    evset.set_local_ports(0b01)
    assert out_ctl.port_status() == 0b01
