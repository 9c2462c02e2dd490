"""Differential test: the same random uSID carriers through BMv2 and through the Linux SRv6 target.

Both switches get the same P4Runtime writes (my_usid + /48 routes) from the same client
code; every carrier must leave both on the same port with the same outer destination
and hop limit, or be dropped by both. The Linux switch lives in namespace ``pb-lsw``
and is fed from ``pb-lhost``; the BMv2 switch is the bench of conftest.

Carriers never repeat the switch's own uSID after the first position: Linux would
shift it a second time in the same pass (its lookup of the shifted address hits the
local End route again) where BMv2 routes it; that is not a carrier MRC ever builds.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bmv2_lab import wait_for
from bmv2_p4rt import P4RuntimeClient
from conftest import H0, H1, IN_PORT, OWN, PORT_OF, T1A, T1B, Switch
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from linux_target.testing import NetnsLab, Sniffer, send_frames
from linux_target.testing import leftovers as linux_leftovers
from mrc_fabric.addressing import carrier, host_usid, nic_address, t0_usid, top48, usid_prefix
from mrc_fabric.p4info import load_p4info

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

MARKER = b"pb-diff-"
HOST_NS, SW_NS = "pb-lhost", "pb-lsw"
POOL = [H0, H1, T1A, T1B, host_usid(0, 15), t0_usid(0, 5), 0x8123]  # routed and unknown uSIDs
N_CARRIERS = 60


@dataclass
class LinuxSwitch:
    p4rt: P4RuntimeClient
    lab: NetnsLab
    sniffers: dict[int, Sniffer]
    in_mac: str

    @staticmethod
    def host_if(port: int) -> str:
        return f"pbl{port}h"

    @staticmethod
    def switch_if(port: int) -> str:
        return f"pbl{port}s"


@pytest.fixture(scope="module")
def linux_switch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LinuxSwitch]:
    run_dir: Path = tmp_path_factory.mktemp("pb-linux")
    with NetnsLab(run_dir) as lab:
        sniffers: dict[int, Sniffer] = {}
        client = None
        try:
            lab.add_ns(HOST_NS)
            lab.add_ns(SW_NS)
            for p in PORT_OF.values():
                lab.veth(HOST_NS, LinuxSwitch.host_if(p), SW_NS, LinuxSwitch.switch_if(p))
            address = lab.start_shim(
                SW_NS, "pb-lsw", 11, {p: LinuxSwitch.switch_if(p) for p in PORT_OF.values()}
            )
            client = P4RuntimeClient(address, 11)
            client.arbitrate()
            client.set_pipeline(load_p4info(), b"")
            for p in PORT_OF.values():
                sniffers[p] = Sniffer(HOST_NS, LinuxSwitch.host_if(p), MARKER)
            in_mac = lab.mac(SW_NS, LinuxSwitch.switch_if(IN_PORT))
            yield LinuxSwitch(client, lab, sniffers, f"{in_mac:012x}")
        finally:
            for s in sniffers.values():
                s.close()
            if client is not None:
                client.close()
    assert linux_leftovers("pb-l") == []


def program(p4rt: P4RuntimeClient, dmac_of) -> None:
    """The same entries on either target: own uSID and one /48 per neighbour."""
    p4rt.insert(
        p4rt.table_entry("my_usid", {"dst_top48": top48(usid_prefix(OWN).network_address)}, "usid_shift")
    )
    for usid, port in PORT_OF.items():
        prefix = usid_prefix(usid)
        p4rt.insert(
            p4rt.table_entry(
                "usid_route", {"dst_addr": (int(prefix.network_address), 48)}, "set_next_hop",
                port=port, dmac=dmac_of(port),
            )
        )  # fmt: skip


def random_carriers(rng: random.Random, n: int) -> list[list[int]]:
    out = []
    for _ in range(n):
        length = rng.randint(2, 6)
        first = OWN if rng.random() < 0.75 else rng.choice(POOL)
        out.append([first, *(rng.choice(POOL) for _ in range(length - 1))])
    return out


def frame(usids: list[int], i: int, dst_mac: str) -> bytes:
    mac = ":".join(dst_mac[k : k + 2] for k in range(0, 12, 2)) if ":" not in dst_mac else dst_mac
    return bytes(
        Ether(src="02:00:00:00:00:01", dst=mac)
        / IPv6(src=str(nic_address(0, 0)), dst=str(carrier(usids)), nh=41, hlim=64, fl=i)
        / IPv6(src=str(nic_address(0, 0)), dst=str(nic_address(0, 1)), nh=17)
        / UDP(sport=1000 + i, dport=4791)
        / Raw(MARKER + f"{i:04d}".encode())
    )


def outcome(frames_by_port: dict[int, list[bytes]]) -> dict[int, tuple[int, str, int]]:
    """carrier index -> (port, outer destination, hop limit), for MRC-shaped frames that came out."""
    got: dict[int, tuple[int, str, int]] = {}
    for port, frames in frames_by_port.items():
        for f in frames:
            pkt = Ether(f)
            if IPv6 not in pkt or pkt[IPv6].nh != 41 or MARKER not in f:
                continue  # e.g. an ICMPv6 error quoting our frame
            i = int(f[f.index(MARKER) + len(MARKER) :][:4])
            assert i not in got, f"carrier {i} came out twice"
            got[i] = (port, pkt[IPv6].dst, pkt[IPv6].hlim)
    return got


def test_random_carriers_leave_bmv2_and_linux_alike(switch: Switch, linux_switch: LinuxSwitch) -> None:
    rng = random.Random(0x5EED)
    carriers = random_carriers(rng, N_CARRIERS)
    program(switch.p4rt, switch.dmac)
    program(linux_switch.p4rt, lambda port: switch.lab.mac(switch.lab.host_if(port)))  # any MAC will do

    # BMv2: send, then one sentinel per port; in-order delivery per egress makes "all arrived" exact.
    sentinels = {p: frame([OWN, usid], 9000 + p, "02:00:00:00:00:fe") for usid, p in PORT_OF.items()}
    switch.lab.taps[IN_PORT].send([frame(c, i, "02:00:00:00:00:fe") for i, c in enumerate(carriers)])
    switch.lab.taps[IN_PORT].send(list(sentinels.values()))
    for p in PORT_OF.values():
        switch.lab.taps[p].wait(1, match=lambda f, p=p: MARKER + f"{9000 + p:04d}".encode() in f)
    bmv2 = {i: o for i, o in outcome({p: t.frames() for p, t in switch.lab.taps.items()}).items() if i < 9000}

    # Linux: the same frames, addressed to the switch port's MAC (the kernel routes only those).
    mac = linux_switch.in_mac
    send_frames(HOST_NS, LinuxSwitch.host_if(IN_PORT), [frame(c, i, mac) for i, c in enumerate(carriers)])
    send_frames(
        HOST_NS, LinuxSwitch.host_if(IN_PORT), [frame([OWN, u], 9000 + p, mac) for u, p in PORT_OF.items()]
    )
    sniffers = linux_switch.sniffers
    for p in PORT_OF.values():
        wait_for(lambda p=p: any(MARKER + f"{9000 + p:04d}".encode() in f for f in sniffers[p].frames), 10,
                 f"the Linux sentinel on port {p}")  # fmt: skip
    linux = {i: o for i, o in outcome({p: s.frames for p, s in sniffers.items()}).items() if i < 9000}

    assert 0 < len(bmv2) < N_CARRIERS, "the random carriers should include routed and dropped ones"
    diffs = {
        i: (carriers[i], bmv2.get(i), linux.get(i)) for i in range(N_CARRIERS) if bmv2.get(i) != linux.get(i)
    }
    assert diffs == {}, "carrier: (uSIDs, BMv2 (port, dst, hlim), Linux (port, dst, hlim))"
