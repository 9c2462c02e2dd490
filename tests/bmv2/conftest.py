"""Fixtures of the BMv2 data-plane tests: the compiled program, one switch, a fresh pipeline per test.

The switch plays T0 #0 of plane 0 (uSID 4000) with four ports:
1 → host 0 (c000), 2 → host 1 (c001), 3 → T1 #0 (8000), 4 → T1 #1 (8001).
Every test starts from a freshly pushed pipeline (empty tables, zero counters and
registers) and default queues; entries come from the helpers below.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bmv2_lab import Bmv2Lab, leftovers
from bmv2_p4rt import P4RuntimeClient
from finsy.proto import p4i
from google.protobuf import text_format

from mrc_fabric.addressing import host_usid, t0_usid, t1_usid, top48, usid_prefix
from mrc_fabric.p4info import P4SRC, load_p4info

OWN = t0_usid(0, 0)  # 0x4000
H0, H1 = host_usid(0, 0), host_usid(0, 1)  # 0xc000, 0xc001
T1A, T1B = t1_usid(0, 0), t1_usid(0, 1)  # 0x8000, 0x8001
PORT_OF = {H0: 1, H1: 2, T1A: 3, T1B: 4}
IN_PORT = 1  # where tests inject frames
QUEUE_DEPTH = 1024  # per queue, packets: bursts of a test never tail-drop unless a test wants it


@dataclass(frozen=True)
class CompiledProgram:
    json_path: Path
    p4info_path: Path

    def p4info(self) -> p4i.P4Info:
        info = p4i.P4Info()
        text_format.Parse(self.p4info_path.read_text(), info)
        return info


def compile_program(out_dir: Path) -> CompiledProgram:
    """p4c-bm2-ss on p4src/mrc_switch.p4 into ``out_dir`` (as `make p4` does into p4src/build)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, p4info_path = out_dir / "mrc_switch.json", out_dir / "mrc_switch.p4info.txtpb"
    res = subprocess.run(
        ["p4c-bm2-ss", "--arch", "v1model", "--std", "p4-16", "-o", str(json_path),
         "--p4runtime-files", str(p4info_path), str(P4SRC / "mrc_switch.p4")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if res.returncode != 0:
        raise AssertionError(f"p4c-bm2-ss failed ({res.returncode}):\n{res.stderr}{res.stdout}")
    return CompiledProgram(json_path, p4info_path)


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> CompiledProgram:
    if shutil.which("p4c-bm2-ss") is None:
        pytest.skip("p4c-bm2-ss not installed")
    return compile_program(tmp_path_factory.mktemp("p4build"))


@pytest.fixture(scope="session", autouse=True)
def no_pb_leftovers() -> Iterator[None]:
    yield
    assert leftovers() == [], "BMv2 tests left interfaces behind"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, compiled: CompiledProgram) -> Iterator[Bmv2Lab]:
    with Bmv2Lab(tmp_path_factory.mktemp("pb-run"), nports=4) as bench:
        yield bench


def write_policy(p4rt: P4RuntimeClient, port: int, ecn: int, trim: int, last_hop: bool = False) -> None:
    """Insert ``port_policy(port)``: thresholds in queued packets (bit<19>), as the P4 program has
    them. Any P4Runtime client of either target (the differential test writes both with it)."""
    p4rt.insert(
        p4rt.table_entry(
            "port_policy", {"port": port}, "set_port_policy",
            ecn_threshold=ecn, trim_threshold=trim, last_hop=int(last_hop),
        )
    )  # fmt: skip


@dataclass
class Switch:
    """The switch under test as a test sees it: P4Runtime client, bench, and entry helpers."""

    p4rt: P4RuntimeClient
    lab: Bmv2Lab

    def dmac(self, port: int) -> int:
        """The next hop behind ``port`` is the test-side veth."""
        return self.lab.mac(self.lab.host_if(port))

    def own_usid(self, usid: int = OWN) -> None:
        self.p4rt.insert(
            self.p4rt.table_entry(
                "my_usid", {"dst_top48": top48(usid_prefix(usid).network_address)}, "usid_shift"
            )
        )

    def route(self, usid: int, port: int) -> None:
        prefix = usid_prefix(usid)
        self.p4rt.insert(
            self.p4rt.table_entry(
                "usid_route", {"dst_addr": (int(prefix.network_address), 48)}, "set_next_hop",
                port=port, dmac=self.dmac(port),
            )
        )  # fmt: skip

    def t0_tables(self) -> None:
        """My uSID plus a /48 route for each neighbour (PORT_OF)."""
        self.own_usid()
        for usid, port in PORT_OF.items():
            self.route(usid, port)

    def policy(self, port: int, ecn: int, trim: int, last_hop: bool = False) -> None:
        write_policy(self.p4rt, port, ecn, trim, last_hop)

    def drops(self, reason: int) -> int:
        return self.p4rt.read_counter("drop_reason", reason).packets

    def qdepth(self, port: int) -> int:
        """The egress_qdepth register cell of ``port``, over Thrift (BMv2's P4Runtime server
        does not read registers). Fast enough to poll while a queue drains."""
        return self.lab.registers().read("egress_qdepth", port)


@pytest.fixture
def switch(lab: Bmv2Lab, compiled: CompiledProgram) -> Iterator[Switch]:
    assert lab.switch is not None
    client = P4RuntimeClient(lab.switch.p4rt_address, lab.device_id, election_id=1)
    try:
        client.arbitrate()
        client.set_pipeline(load_p4info(), compiled.json_path.read_bytes())
        lab.switch.set_queue_depth(None, QUEUE_DEPTH)
        for tap in lab.taps.values():
            tap.clear()
        yield Switch(client, lab)
    finally:
        client.close()
        if lab.switch is not None and lab.switch.running():
            lab.switch.set_queue_rate(None, 0)  # unlimited, as at start
