"""The gRPC/Thrift ports handed to BMv2 switches: bindable, distinct, below the ephemeral range.

A port the kernel hands out for ``bind(0)`` lies in the ephemeral range, where any outgoing
connection (the controller's channels to the switches started first) may take it before the
switch binds it: one bench run lost a switch's Thrift server that way.
"""

from __future__ import annotations

import socket

import pytest

from topologies.bmv2_switch import LOOPBACK, PORT_POOL_LOW, _ephemeral_low, free_tcp_port


def test_ports_are_distinct_bindable_and_outside_the_ephemeral_range() -> None:
    ports = [free_tcp_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    low = _ephemeral_low()
    assert all(PORT_POOL_LOW <= p < low for p in ports)
    for p in ports[:20]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((LOOPBACK, p))


def test_a_port_in_use_or_handed_out_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    from topologies import bmv2_switch

    first = free_tcp_port()  # handed out (not bound)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind((LOOPBACK, first + 1 if first + 1 < _ephemeral_low() else first - 1))
        busy = held.getsockname()[1]
        draws = iter([first, busy, busy, first, *range(PORT_POOL_LOW, _ephemeral_low())])

        class Draws:
            def randrange(self, low: int, high: int) -> int:
                return next(draws)

        monkeypatch.setattr(bmv2_switch, "_RANDOM", Draws())
        got = free_tcp_port()
        assert got not in (first, busy) and got >= PORT_POOL_LOW
