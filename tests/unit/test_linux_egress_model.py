"""The Linux target's egress model without a kernel: port_policy → map entries, counters, the
virtual queue's drain arithmetic, build errors that name the missing tool."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from test_shim_kernel_state import IX, PORTS, row

from linux_target import egress
from linux_target.counters import DROP_QUEUE_FULL, DROP_TRIMMED, CounterReader
from linux_target.egress import QUEUE_CELL_BYTES, BpfBuildError, Policy, PortState
from linux_target.kernel_programmer import KernelProgrammer
from linux_target.kernel_state import KernelState, PolicySpec, Tables, desired_state, updated_state


def policy_row(port: int, ecn: int, trim: int, last_hop: int) -> Any:
    return row(
        "port_policy",
        {"port": port},
        "set_port_policy",
        ecn_threshold=ecn,
        trim_threshold=trim,
        last_hop=last_hop,
    )


def tables(*rows: Any) -> Tables:
    out: Tables = {alias: {} for alias in IX.tables}
    for r in rows:
        out[r.table][r.key] = r
    return out


def test_port_policy_becomes_a_policy_of_the_port() -> None:
    state = desired_state(tables(policy_row(2, 20, 64, 1)), PORTS, IX)
    assert state.policies == {2: PolicySpec(2, "ls-b", 20, 64, True)}
    cleared = updated_state(state, tables(), PORTS, IX, set(), set(), {2})
    assert cleared.policies == {}


def test_policy_in_bytes_is_packets_times_a_full_frame() -> None:
    assert Policy.from_packets(20, 64, False) == Policy(20 * 1514, 64 * 1514, False)
    assert QUEUE_CELL_BYTES == 1514


class FakeEgress:
    def __init__(self) -> None:
        self.written: list[Policy | None] = []

    def write_policy(self, policy: Policy | None) -> None:
        self.written.append(policy)


def test_programmer_writes_policies_and_their_undo() -> None:
    fake = FakeEgress()
    prog = KernelProgrammer(None, None, {2: fake})  # type: ignore[arg-type,dict-item]
    old = KernelState()
    new = KernelState(policies={2: PolicySpec(2, "ls-b", 3, 5, False)})
    steps = prog.steps(old, new)
    assert [s.what for s in steps] == ["port policy 2"]
    steps[0].do()
    steps[0].undo()
    assert fake.written == [Policy(3 * 1514, 5 * 1514, False), None]
    # a port without an egress program (shim run with --no-egress-model): nothing to do
    assert KernelProgrammer(None, None, {}).steps(old, new) == []  # type: ignore[arg-type]


def test_counters_come_from_the_egress_state() -> None:
    states = {
        1: PortState(marked_packets=4, marked_bytes=4000, trimmed_packets=2, trimmed_bytes=3000),
        2: PortState(trimmed_packets=1, trimmed_bytes=1500, dropped_packets=7, dropped_bytes=7000),
    }
    calls = []

    def read_states() -> dict[int, PortState]:
        calls.append(1)
        return states

    reader = CounterReader(PORTS, {}, {}, {}, read_states)
    assert reader.value("port_rx", 1) == (0, 0)
    assert calls == []  # the maps are read only when a counter needs them, and once
    assert reader.value("ecn_marked", 1) == (4, 4000)
    assert reader.value("ecn_marked", 2) == (0, 0)
    assert reader.value("ecn_marked", 9) == (0, 0)  # not a port of this switch
    assert reader.value("drop_reason", DROP_TRIMMED) == (3, 4500)
    assert reader.value("drop_reason", DROP_QUEUE_FULL) == (7, 7000)
    assert calls == [1]


def test_virtual_queue_drains_at_the_link_rate_between_frames() -> None:
    s = PortState(queue_bytes=100_000, last_ns=1_000_000_000)
    rate = 8_000_000  # 1 MB/s: 1000 bytes per millisecond
    assert s.queue_at(1_000_000_000, rate) == 100_000
    assert s.queue_at(1_010_000_000, rate) == 90_000
    assert s.queue_at(1_200_000_000, rate) == 0
    assert s.queue_at(2_000_000_000, 0) == 0  # unlimited port: never a queue


def test_htb_has_a_high_class_and_a_data_class_at_the_link_rate() -> None:
    cmds = [" ".join(c) for c in egress.htb_commands("p1", 50_000_000)]
    assert "classid 1:10 htb rate 50000000bit ceil 50000000bit" in cmds[0]
    assert "classid 1:1 " in cmds[1] and "prio 0" in cmds[1]
    assert "classid 1:2 " in cmds[2] and "prio 1" in cmds[2] and "ceil 50000000bit" in cmds[2]


def test_a_missing_compiler_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(egress, "OBJECT", tmp_path / "none.o")
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "clang" else real(name))
    with pytest.raises(BpfBuildError, match=r"clang \(apt-get install clang llvm\)"):
        egress.build_object()


@pytest.mark.skipif(bool(egress.missing_tools()), reason="clang/libbpf-dev/bpftool not installed")
def test_the_c_structs_match_the_python_layouts() -> None:
    """The map values are packed by hand in Python: their sizes must be the C structs' (BTF)."""
    import json
    import subprocess

    obj = egress.build_object()
    btf = json.loads(subprocess.run(["bpftool", "-j", "btf", "dump", "file", str(obj)], capture_output=True,
                                    text=True, check=True).stdout)  # fmt: skip
    sizes = {t["name"]: t["size"] for t in btf["types"] if t.get("kind") == "STRUCT" and "name" in t}
    assert sizes["policy"] == egress._POLICY.size
    assert sizes["link"] == egress._LINK.size
    assert sizes["state"] == egress._STATE.size
