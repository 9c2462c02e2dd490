"""A quiet start: HTB's quantum written out (no kernel warning per port), libbpf's refusals
said in the error, not on stderr; the shim names --no-egress-model only to a terminal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from linux_target import bpf_loader
from linux_target.egress import HTB_QUANTUM_MAX, HTB_QUANTUM_MIN, PortEgress, htb_commands, htb_quantum
from topologies.rate_link import RateIntf


@pytest.mark.parametrize(
    ("rate_bps", "quantum"),
    [(20e6, HTB_QUANTUM_MAX), (16e6, HTB_QUANTUM_MAX), (8e6, 100_000), (100e3, 1250), (8e3, HTB_QUANTUM_MIN)],
)
def test_the_quantum_is_what_the_kernel_would_settle_on(rate_bps: float, quantum: int) -> None:
    assert htb_quantum(rate_bps) == quantum  # rate / r2q 10, held in 1,000..200,000 bytes


def test_every_htb_class_of_a_port_names_its_quantum() -> None:
    for verb in ("add", "change"):
        for cmd in htb_commands("p1", 20_000_000, verb):
            assert "quantum" in cmd, cmd
    setup = PortEgress("p1").setup_commands(20_000_000)
    assert all("quantum" in c for c in setup if c[:2] == ["tc", "class"])
    assert setup[-1] == ["tc", "qdisc", "add", "dev", "p1", "clsact"]  # the program: bpf_loader
    assert not any("bpf" in c for c in setup)


class _Node:
    name = "h0"


def test_mininets_rate_limited_link_gets_the_same_quantum() -> None:
    intf = RateIntf.__new__(RateIntf)
    intf.node, intf.bwParamMax = _Node(), 1000
    cmds, parent = intf.bwCmds(bw=20)
    (cls,) = [c for c in cmds if "classid 5:1 htb" in c]
    assert cls.endswith(f" quantum {HTB_QUANTUM_MAX}") and parent == " parent 5:1 "
    assert intf.bwCmds(bw=None)[0] == []


def test_an_object_libbpf_cannot_read_is_refused_with_libbpfs_reason(tmp_path: Path) -> None:
    junk = tmp_path / "junk.o"
    junk.write_bytes(b"not an ELF object")
    with pytest.raises(bpf_loader.BpfLoadError) as err:
        bpf_loader.load_object(junk, "mrc_egress")
    text = str(err.value)
    assert text.startswith(f"[Errno 4001] libbpf cannot open {junk}") and "not a proper ELF" in text
    assert "Unknown error" not in text


def test_a_program_missing_from_the_object_is_named() -> None:
    from linux_target.egress import build_object

    obj = build_object()
    with pytest.raises(bpf_loader.BpfLoadError, match="has no program named nope"):
        bpf_loader.load_object(obj, "nope")


def test_the_shims_hint_goes_to_a_terminal_only(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from linux_target import shim_main
    from linux_target.shim_switch import EgressSetupError

    def refuse(args: Any) -> int:
        raise EgressSetupError("the egress program does not load here: ...")

    monkeypatch.setattr(shim_main, "run", refuse)
    argv = ["--name", "s1", "--device-id", "1", "--listen", "unix:/tmp/x.sock", "--log", "/dev/null"]
    assert shim_main.main(argv) == 2
    assert "--no-egress-model" not in capsys.readouterr().err  # as under a testbed: no terminal
    monkeypatch.setattr(shim_main.sys.stderr, "isatty", lambda: True)
    assert shim_main.main(argv) == 2
    assert "--no-egress-model" in capsys.readouterr().err
