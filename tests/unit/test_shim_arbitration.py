"""Primary election of the shim's StreamChannel and its command line (no root)."""

from __future__ import annotations

import argparse

import pytest
from finsy.proto import p4r, rpc_code

from linux_target.arbitration import Arbitration, ClientStream
from linux_target.errors import P4RuntimeError
from linux_target.shim_main import kernel_version, listen_address, parse_port


def update(eid: int, device: int = 1) -> p4r.MasterArbitrationUpdate:
    u = p4r.MasterArbitrationUpdate(device_id=device)
    u.election_id.low = eid
    return u


def drain(s: ClientStream) -> list[int]:
    out = []
    while not s.outbox.empty():
        out.append(s.outbox.get().arbitration.status.code)
    return out


def test_highest_id_is_primary_and_everyone_hears_of_changes() -> None:
    arb = Arbitration(1)
    a, b, silent = ClientStream(), ClientStream(), ClientStream()
    for s in (a, b, silent):
        arb.open(s)
    arb.request(a, update(5))
    assert drain(a) == [rpc_code.OK]
    arb.request(b, update(9))
    assert drain(b) == [rpc_code.OK] and drain(a) == [rpc_code.ALREADY_EXISTS]
    assert drain(silent) == []  # never arbitrated: not told
    arb.check_primary(update(9).election_id, True)
    with pytest.raises(P4RuntimeError, match="not the primary"):
        arb.check_primary(update(5).election_id, True)
    arb.close(b)
    assert drain(a) == [rpc_code.OK] and arb.primary_election_id() == 5


def test_duplicate_id_and_wrong_device() -> None:
    arb = Arbitration(1)
    a, b = ClientStream(), ClientStream()
    arb.open(a)
    arb.open(b)
    arb.request(a, update(3))
    with pytest.raises(P4RuntimeError, match="election_id"):
        arb.request(b, update(3))
    with pytest.raises(P4RuntimeError, match="device_id"):
        arb.request(b, update(4, device=2))


def test_no_primary_means_no_writes() -> None:
    with pytest.raises(P4RuntimeError, match="no primary"):
        Arbitration(1).check_primary(p4r.Uint128(low=1), True)


def test_cli_parsing() -> None:
    assert parse_port("3=ls1-eth3") == (3, "ls1-eth3")
    for bad in ("x=eth0", "3", "512=eth0", "1=an-interface-name-too-long"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_port(bad)
    assert kernel_version("6.1.0-13-amd64") == (6, 1)
    assert listen_address("unix:///tmp/a.sock")[1].as_posix() == "/tmp/a.sock"
    assert listen_address("127.0.0.1:9559") == ("127.0.0.1:9559", None)
