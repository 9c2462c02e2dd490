"""Virtual payloads (``--payload virtual``): a length and a check value per packet, regions
without memory, and every result but memory the same as with real bytes."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from mrc_host.core.records import PendingWrite, joined
from mrc_host.core.region import RegionTable
from mrc_host.sim import cli, jsonout
from mrc_host.sim import scenario_file as sf
from mrc_host.sim.engine import RING_NS, SEQ_LIMIT, EventLoop
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.network import AUTO_REAL_BYTES, FlowSpec, Network, choose_payload, content_key
from mrc_host.sim.report import summarise_network
from mrc_host.sim.scenario import SimConfig, Simulation
from mrc_host.sim.traffic import Job, point_to_point
from mrc_host.wire.codec import FrameEncoder
from mrc_host.wire.messages import DataPacket, NackReason
from mrc_host.wire.samples import SAMPLE_ADDRESSING, SAMPLE_CARRIER
from mrc_host.wire.virtual_payload import VirtualPayload, content_check


def test_a_virtual_payload_slices_like_bytes_and_its_checks_name_the_place() -> None:
    v = VirtualPayload(7, 0, 10_000)
    part = v[4096:8192]
    assert len(v) == 10_000 and len(part) == 4096 and part.offset == 4096 and part.key == 7
    assert len(v[8192:20_000]) == 10_000 - 8192 and len(v[:0]) == 0
    assert part.check == content_check(7, 4096, 4096)
    # a piece of the same length at another place, or of another content, has another check
    others = {content_check(7, off, 4096) for off in range(0, 1 << 22, 4096)}
    assert len(others) == 1 << 10 and content_check(8, 4096, 4096) != part.check
    with pytest.raises(ValueError):
        v[::2]


def test_a_virtual_region_holds_no_memory_and_verifies_every_piece() -> None:
    regions = RegionTable()
    key = 99
    region = regions.register(0x1000, 8192, 5, check_key=key)
    assert region.virtual and len(region.buffer) == 0
    content = VirtualPayload(key, 0, 8192)
    assert regions.write(0x1000 + 4096, 5, content[4096:8192]) is None
    assert not region.holds(8192) and region.holds(0)  # the first half is missing
    assert regions.write(0x1000, 5, content[0:4096]) is None
    assert region.holds(8192) and region.bad_checks == 0 and len(region.buffer) == 0
    # a piece placed where it does not belong is written (as wrong bytes would be) and counted
    assert regions.write(0x1000, 5, content[4096:8192]) is None
    assert region.bad_checks == 1 and not region.holds(8192)
    # bounds as for bytes; bytes into a virtual region and a virtual piece into a real one refused
    assert regions.write(0x1000 + 8000, 5, content[0:4096]) is NackReason.BAD_ADDRESS
    assert regions.write(0x1000, 5, b"x" * 16) is NackReason.BAD_ADDRESS
    regions.register(0x9000, 64, 6)
    assert regions.write(0x9000, 6, content[0:16]) is NackReason.BAD_ADDRESS


def test_a_write_of_virtual_segments_is_cut_into_virtual_packets() -> None:
    v = VirtualPayload(3, 0, 10_000)
    w = PendingWrite(1, [v[:5000], v[5000:]], 0, 1)
    cut = [w.take(4096), w.take(4096), w.take(10_000 - 8192)]
    assert [(p.offset, len(p)) for p in cut if isinstance(p, VirtualPayload)] == [
        (0, 4096),
        (4096, 4096),
        (8192, 1808),
    ]
    assert all(isinstance(p, VirtualPayload) and p.check == content_check(3, p.offset, len(p)) for p in cut)
    with pytest.raises(ValueError):
        joined([v[0:10], VirtualPayload(4, 10, 10)])  # not one content
    with pytest.raises(ValueError):
        joined([v[0:10], b"abc"])


def test_the_codec_refuses_to_put_a_virtual_payload_in_a_frame() -> None:
    pkt = DataPacket(1, 0, 0, 1, VirtualPayload(1, 0, 64))
    with pytest.raises(ValueError, match="virtual"):
        FrameEncoder(SAMPLE_ADDRESSING).encode(pkt, SAMPLE_CARRIER.packed)


def _lossy_run(payload: str) -> tuple[dict[str, Any], Network]:
    """An incast with trimming and a lossy link, so resends, trims and NACKs all happen."""
    net = Network(
        FabricShape(planes=2, t0=3, t1=2, hosts_per_t0=2, trim_bytes=32 << 10), seed=5, payload=payload
    )
    job = point_to_point(
        net, Job("in", "incast", 0), FlowSpec("x", 0, 0), [(2, 0), (3, 0), (4, 0), (5, 0)], 300_000
    )
    from mrc_host.sim.faults import parse_fault

    net.add_fault(parse_fault("loss=0.01:p0-t0_1-t1_0@0", ideal_ns=1))
    net.run(200_000_000)
    return summarise_network(net, [job], "mrc"), net


def test_real_and_virtual_payloads_give_the_same_results() -> None:
    real, rnet = _lossy_run("real")
    virtual, vnet = _lossy_run("virtual")
    assert real["completed"] and real["data_ok"] and virtual["data_ok"]
    assert real["payload"] == "real" and virtual["payload"] == "virtual"
    trims = real["switch_trims"] + real["nic_trims"]
    resent = sum(f["retransmissions"] for f in real["flows"])
    assert trims > 0 and resent > 0, (trims, resent)  # the comparison covers resends and trims
    real.pop("payload"), virtual.pop("payload")
    assert jsonout.dumps(real) == jsonout.dumps(virtual)
    assert sum(len(c.region.buffer) for c in vnet.connections) == 0
    assert all(len(c.region.buffer) == c.payload_size for c in rnet.connections)


def test_the_single_flow_run_is_the_same_with_either_payload_and_says_which() -> None:
    def one(payload: str) -> dict[str, Any]:
        cfg = SimConfig(
            shape=FabricShape(t1=4), size=3 << 20, faults=["loss=0.003:all@0"], seed=2, payload=payload
        )
        return Simulation(cfg).run()

    real, virtual = one("real"), one("virtual")
    assert (real["payload"], virtual["payload"]) == ("real", "virtual") and virtual["data_ok"]
    assert real["retransmissions"] > 0
    real.pop("payload"), virtual.pop("payload")
    assert jsonout.dumps(real) == jsonout.dumps(virtual)


def test_a_packet_placed_at_the_wrong_address_fails_the_virtual_check() -> None:
    net = Network(FabricShape(), seed=1, payload="virtual")
    conn = net.add_flow(FlowSpec("f", 0, 1), 64 << 10)
    other = VirtualPayload(content_key(1, 5), 0, 64 << 10)  # another connection's content
    conn.payload = [other]
    w = net.post(conn, 64 << 10)
    net.run(10_000_000)
    assert w.done and conn.region.bad_checks == 16 and not conn.data_ok


def test_auto_is_real_up_to_the_bound_and_files_and_flags_choose() -> None:
    assert choose_payload("auto", AUTO_REAL_BYTES) == "real"
    assert choose_payload("auto", AUTO_REAL_BYTES + 1) == "virtual"
    with pytest.raises(ValueError):
        choose_payload("fake", 1)
    sc = sf.load_text(
        'payload = "virtual"\n[[traffic]]\npattern = "flow"\nsrc = 0\ndst = 1\nsize = "64KiB"\n'
    )
    assert sc.payload == "virtual" and sf.load_text(sf.to_toml(sc)).payload == "virtual"
    with pytest.raises(sf.ScenarioError, match="payload"):
        sf.load_text('payload = "paper"\n[[traffic]]\npattern = "flow"\nsrc = 0\ndst = 1\nsize = 1\n')
    out = sf.run_scenario(sc)
    assert out["runs"]["mrc"]["payload"] == "virtual" and out["runs"]["mrc"]["data_ok"]


def test_the_cli_takes_payload_and_reports_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--size", "256KiB", "--payload", "virtual", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["payload"] == "virtual" and got["data_ok"] and got["completed"]
    assert cli.main(["--size", "256KiB", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["payload"] == "real"  # auto, small


def test_renumbering_the_event_sequence_keeps_every_tie_in_order() -> None:
    loop = EventLoop()
    fired: list[int] = []
    loop.seq = SEQ_LIMIT - 3  # two more numbers, then the waiting events are renumbered
    loop.at(100, fired.append, -1)  # due soon: its ring slot's entry on the heap keeps its number
    loop.at(100, fired.append, -2)
    for i in range(8):  # due a ring's span or more ahead: on the heap, numbered
        loop.at(RING_NS + 100 + i % 2, fired.append, i)
    loop.run(10 * RING_NS)
    assert fired == [-1, -2, 0, 2, 4, 6, 1, 3, 5, 7] and loop.seq < 16


def test_the_check_is_the_products_in_full() -> None:
    """The check applies its 32-bit constants in 16-bit halves (compiled, a factor of 2**30
    or more is a big-integer multiply): the value is the plain formula's, for every field
    at and past its mask."""
    from mrc_host.wire.virtual_payload import _K1, _K2, _MASK, _times

    def plain(key: int, offset: int, length: int) -> int:
        h = (key & 0x3FF_FFFF) * _K1 ^ (offset & 0xFF_FFFF_FFFF) * 0x2F ^ (length & 0xFFFF) * _K2
        return (h ^ (h >> 29)) & _MASK

    rng = random.Random(3)
    cases = [(0, 0, 0), ((1 << 26) - 1, (1 << 40) - 1, 0xFFFF), ((1 << 70) - 1, 1 << 45, 1 << 17)]
    cases += [tuple(rng.randrange(1 << rng.randrange(1, 64)) for _ in range(3)) for _ in range(20_000)]
    for key, offset, length in cases:
        assert content_check(key, offset, length) == plain(key, offset, length)
    assert _times((1 << 30) - 1, (1 << 32) - 1) == ((1 << 30) - 1) * ((1 << 32) - 1)
